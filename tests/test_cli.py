"The `ragnb` command: each command's one-line help is defined once, in ragnb.app.cli.COMMANDS."
import argparse, ast, contextlib, io
from pathlib import Path
import pytest
from ragnb.app.cli import COMMANDS, Subcommands, build_parser, main

PKG = Path(__file__).resolve().parents[1]/'ragnb'

def flat(s): return ' '.join(s.split())

def top_help(command=None):
    "`ragnb --help` as printed, built the way `main` builds it for `ragnb <command> ...`."
    return flat(build_parser(command).format_help())

def test_help_lists_every_command_with_its_one_help():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit): main(['--help'])
    for c, (_, help) in COMMANDS.items(): assert f"{c} {flat(help)}" in flat(out.getvalue()), c

@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_command_parser_keeps_the_help(command):
    "With the command's module loaded (its add_cli ran), the listing and the command's description are the same text."
    assert f"{command} {flat(COMMANDS[command][1])}" in top_help(command)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit): main([command, '--help'])
    assert out.getvalue().startswith(f'usage: ragnb {command}')
    assert flat(COMMANDS[command][1]) in flat(out.getvalue())

def add_parser_helps():
    "(module, command, help text or None) for every `sub.add_parser(...)` call in ragnb's modules."
    for f in sorted(PKG.rglob('*.py')):
        if f.stem in ('cli', '_modidx'): continue
        for n in ast.walk(ast.parse(f.read_text(encoding='utf-8'))):
            if isinstance(n, ast.Call) and getattr(n.func, 'attr', None) == 'add_parser':
                help = next((k.value for k in n.keywords if k.arg == 'help'), None)
                yield '.'.join(f.relative_to(PKG).with_suffix('').parts), ast.literal_eval(n.args[0]), None if help is None else ast.literal_eval(help)

def test_no_module_passes_its_own_help():
    found = list(add_parser_helps())
    assert sorted((f'ragnb.{m}', c) for m, c, _ in found) == sorted((m, c) for c, (m, _) in COMMANDS.items())
    assert not [(m, c) for m, c, h in found if h is not None], 'help text belongs in COMMANDS'
    assert not [(m, c) for m, c, h in found if h is not None and h != COMMANDS[c][1]], 'help differs from COMMANDS'

def test_subcommands_rejects_another_help():
    sc = Subcommands(argparse.ArgumentParser(prog='ragnb').add_subparsers())
    with pytest.raises(ValueError, match='help differs'): sc.add_parser('metrics', help='something else')
    assert sc.add_parser('metrics', description='own text').description == 'own text'

@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_every_option_with_a_default_shows_it_in_help(command):
    "Each option of each command whose default is a value (not None or a flag's False) says it in `--help`."
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    sub.format_help()   # DefaultsHelp gives an option without help text its '(default: ...)' line as it formats
    fmt = sub._get_formatter()
    missing = []
    for a in sub._actions:
        if not a.option_strings or a.default in (None, False, argparse.SUPPRESS) or isinstance(a, argparse._HelpAction):
            continue
        text = fmt._expand_help(a) if a.help else ''
        if 'default' not in text: missing.append(a.option_strings[-1])
    assert not missing, f"ragnb {command}: options without their default in --help: {missing}"
