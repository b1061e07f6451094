"The rooms of the package: who imports whom (no cycles, floors respected, the scripted model out of the stages)."
import ast, json, re, subprocess, sys
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1]/'ragnb'
MODULES = sorted('.'.join(p.relative_to(PKG).with_suffix('').parts) for p in PKG.rglob('*.py')
                 if p.stem not in ('__init__', '_modidx'))   # dotted below ragnb: 'core.llm'
# The subpackages' floors, from the ground floor up (see ARCHITECTURE.md): a module imports only from its own
# subpackage or one on a lower floor.
FLOORS = {'core': 1, 'docs': 2, 'synth': 3, 'check': 4, 'view': 5, 'rag': 6, 'testing': 7, 'app': 8}
ENTRY = {'testing.scripted', 'app.cli', 'app.demo', 'app.commands.scripted'}  # may import the scripted model
MODEL = {'testing.scripted', 'testing.rules'}  # the scripted model: the test server and its rules

LOADERS = {'lazy', 'import_module', '__import__', 'find_spec'}  # calls that import a module named by a string

def floor(mod): return FLOORS.get(mod.split('.')[0], 0)

def imports(mod, top_only, src=None):
    ("ragnb modules imported by `mod` (at module level only, or anywhere: in function bodies too, and modules named "
     "by a string to `lazy`/`importlib.import_module`), with the names taken from each.")
    tree = ast.parse(src if src is not None else (PKG/(mod.replace('.', '/') + '.py')).read_text())
    nodes = tree.body if top_only else list(ast.walk(tree))
    here, out = mod.split('.')[:-1], []
    for n in nodes:
        if isinstance(n, ast.ImportFrom):
            if n.level: base = '.'.join(here[:len(here) - n.level + 1] + ([n.module] if n.module else []))
            elif n.module == 'ragnb' or (n.module or '').startswith('ragnb.'): base = n.module[6:]
            else: continue
            for a in n.names:
                sub = f'{base}.{a.name}' if base else a.name
                out.append((sub, a.name) if sub in MODULES else (base, a.name))
        elif isinstance(n, ast.Import):
            out += [(a.name[6:], None) for a in n.names if a.name.startswith('ragnb.')]
        elif isinstance(n, ast.Call) and getattr(n.func, 'id', getattr(n.func, 'attr', None)) in LOADERS and n.args:
            a = n.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith('ragnb.'):
                out.append((a.value[6:], None))
    return [(t, name) for t, name in out if t in MODULES and t != mod]

def test_every_module_has_a_floor():
    assert not [m for m in MODULES if m.split('.')[0] not in FLOORS], \
        'put the new module in a subpackage of FLOORS (and in ARCHITECTURE.md)'

def test_no_import_cycles():
    "No loop between ragnb modules, counting the imports inside functions: orchestration lives above what it joins."
    graph = {m: {t for t, _ in imports(m, top_only=False)} for m in MODULES}
    state = {}
    def visit(m, path):
        if state.get(m) == 'done': return
        assert state.get(m) != 'open', f"import cycle: {' -> '.join(path + [m])}"
        state[m] = 'open'
        for t in sorted(graph[m]): visit(t, path + [m])
        state[m] = 'done'
    for m in MODULES: visit(m, [])

def test_imports_in_function_bodies_and_strings_count():
    src = ("import os\nfrom ragnb.core.llm import LLM\ndef f():\n    from ragnb.core.batch import BatchAPI\n"
           "    from .generate import QA\n    import ragnb.synth.diversity\n    return lazy('ragnb.check.checker')\n")
    assert {t for t, _ in imports('synth.x', top_only=True, src=src)} == {'core.llm'}
    assert ({t for t, _ in imports('synth.x', top_only=False, src=src)}
            == {'core.llm', 'core.batch', 'synth.generate', 'synth.diversity', 'check.checker'})

@pytest.mark.parametrize('mod', MODULES)
def test_floors_and_private_names(mod):
    for target, name in imports(mod, top_only=False):
        assert floor(target) <= floor(mod), f"{mod} (floor {floor(mod)}) imports {target} (floor {floor(target)})"
        assert not (name or '').startswith('_'), f"{mod} imports the private name {name} from {target}"
        if mod not in ENTRY | MODEL: assert target not in MODEL, f"{mod} imports the scripted model ({target})"

# One process imports the heavy third-party libraries ragnb's modules share (never ragnb), then forks a child per
# module that imports that module and nothing else of ragnb: each starts with no ragnb module loaded, so no module is
# importable only because another ran first, without paying numpy, pandas, openai and jsonschema once per module.
ALONE = """
import importlib, json, os, sys, traceback
import numpy, pandas, openai, jsonschema
assert not [k for k in sys.modules if k == 'ragnb' or k.startswith('ragnb.')]
out = {}
for m in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try: importlib.import_module('ragnb.' + m); err = ''
        except BaseException: err = traceback.format_exc()
        os.write(w, err.encode()); os._exit(0)
    os.close(w)
    with os.fdopen(r, 'rb') as f: err = f.read().decode()
    _, status = os.waitpid(pid, 0)
    out[m] = err or ('' if status == 0 else f'the child ended with status {status}')
print(json.dumps(out))
"""

def test_each_module_imports_alone():
    r = subprocess.run([sys.executable, '-c', ALONE, *MODULES], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    errors = json.loads(r.stdout.splitlines()[-1])
    assert sorted(errors) == MODULES
    for m in MODULES: assert not errors[m], f'ragnb.{m}: {errors[m][-800:]}'


# Issue 52: public names are those another module, another lesson, the README or the front door uses; the rest are
# internal (`#| exporti`). 720 before, fewer than 300 is the goal: this number only goes down.
MAX_PUBLIC = 350

def public_names() -> dict:
    "{module: its `__all__`} of every module but the package's front door (which repeats names of the others)."
    out = {}
    for m in MODULES:
        for n in ast.parse((PKG/(m.replace('.', '/') + '.py')).read_text()).body:
            if isinstance(n, ast.Assign) and any(getattr(t, 'id', None) == '__all__' for t in n.targets):
                out[m] = ast.literal_eval(n.value)
    return out

def test_public_names_do_not_grow():
    n = sum(map(len, public_names().values()))
    assert n <= MAX_PUBLIC, (f"{n} public names, more than {MAX_PUBLIC}: make a name no other module, lesson, README "
                             "or the front door uses internal (#| exporti), or raise MAX_PUBLIC saying why")


# Modules assembled from several notebooks' `#| export module` cells, each explained in ARCHITECTURE.md: a
# stage above the view floor teaches its figure in its own lesson, and each stage's scripted rules sit in its lesson.
ASSEMBLED = {'view.plots', 'testing.rules'}

def notebooks_of(mod) -> set:
    "The notebooks whose cells `nbdev_export` wrote into `mod` (its `# %% ../nbs/X.ipynb` cell markers)."
    text = (PKG/(mod.replace('.', '/') + '.py')).read_text()
    return set(re.findall(r'(?m)^# %% [./]*nbs/([\w.-]+\.ipynb)', text))

def test_modules_come_from_one_notebook():
    many = {m: sorted(notebooks_of(m)) for m in MODULES if len(notebooks_of(m)) > 1}
    assert set(many) <= ASSEMBLED, (f"modules assembled from several notebooks: {many}; export each from one notebook, "
                                    "or say why in ARCHITECTURE.md and add it to ASSEMBLED")
    why = (PKG.parent/'ARCHITECTURE.md').read_text()
    assert [m for m in ASSEMBLED if f'#| export {m}' not in why] == [], 'say why in ARCHITECTURE.md'
    assert notebooks_of('core.llm') == {'14_llm.ipynb'} and len(notebooks_of('testing.rules')) > 1

# Imports inside functions from another room: each defers a module to its first use (a command's --help, `import
# ragnb.X` and the front door stay light) or draws a figure of a lower stage's result. None may be added: import at the
# top of the module, or move the work to the room that owns it. Lower the count when one goes.
MAX_DEFERRED = 15

def deferred_across_rooms() -> set:
    "(module, module it imports inside a function and not at its top) pairs whose subpackages differ."
    out = set()
    for m in MODULES:
        top = {t for t, _ in imports(m, top_only=True)}
        out |= {(m, t) for t, _ in imports(m, top_only=False) if t.split('.')[0] != m.split('.')[0] and t not in top}
    return out

def test_imports_inside_functions_across_rooms_do_not_grow():
    pairs = deferred_across_rooms()
    assert len(pairs) <= MAX_DEFERRED, (f"{len(pairs)} imports inside functions across rooms, more than {MAX_DEFERRED}: "
                                        f"{sorted(pairs)}")
    assert ('rag.retrieval', 'view.plots') in pairs   # one is seen: a retrieval report's `.plot()` draws in the view floor


# Issue 52: the view floor draws and shows; it calls no model. A model is reached through `LLM` (or the checkers built
# on it); the commands that build one from their options (`ragnb audit`) are in the app layer.
MODEL_NAMES = {'LLM', 'profile_checker', 'llm_checker', 'small_checker', 'run_checks', 'extract_claims', 'audit',
               'generate_dataset', 'mixed_dataset', 'multimodal_dataset', 'run_system', 'evaluate_system'}

def model_uses(src:str) -> list:
    "(function, name) for each call of a model-calling name."
    out = []
    def walk(node, fn):
        for ch in ast.iter_child_nodes(node):
            f = ch.name if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if isinstance(ch, ast.Call) and getattr(ch.func, 'id', getattr(ch.func, 'attr', None)) in MODEL_NAMES:
                out.append((f, getattr(ch.func, 'id', getattr(ch.func, 'attr', None))))
            walk(ch, f)
    walk(ast.parse(src), None)
    return out

def test_views_call_no_model():
    assert model_uses("def _cli_x(args):\n    a = audit(r, LLM())\ndef f(x): return LLM()\n") == [
        ('_cli_x', 'audit'), ('_cli_x', 'LLM'), ('f', 'LLM')]
    for m in [m for m in MODULES if m.startswith('view.')]:
        assert not model_uses((PKG/(m.replace('.', '/') + '.py')).read_text()), \
            f"ragnb.{m} calls a model: move that to the check, synth or rag floor (a command: to ragnb.app.commands)"

def commands_below_the_app(src:str) -> list:
    "Names of the top-level command definitions in `src`: `add_cli` and `_cli_*` functions."
    return [n.name for n in ast.parse(src).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (n.name == 'add_cli' or n.name.startswith('_cli_'))]

def test_every_command_is_in_the_app_layer():
    "A stage's module holds its logic; the commands that read options and print to a terminal are `ragnb.app`'s."
    assert commands_below_the_app("def add_cli(sub): pass\ndef _cli_x(a): pass\ndef run(x): pass\n") == [
        'add_cli', '_cli_x']
    for m in [m for m in MODULES if floor(m) < FLOORS['app']]:
        assert not commands_below_the_app((PKG/(m.replace('.', '/') + '.py')).read_text()), \
            f"ragnb.{m} defines a command: move it to ragnb.app.commands (one module per stage)"

def imports_argparse(src:str) -> bool:
    "Whether `src` imports argparse anywhere (a parser, an option type, an `ArgumentTypeError`)."
    return any(isinstance(n, ast.Import) and any(a.name == 'argparse' for a in n.names)
               or isinstance(n, ast.ImportFrom) and n.module == 'argparse' for n in ast.walk(ast.parse(src)))

def test_only_the_app_layer_knows_argparse():
    "Options are read by the commands (`ragnb.app.commands`); a stage takes them as arguments of its functions."
    assert imports_argparse("def f():\n    import argparse\n") and not imports_argparse("import json\n")
    for m in [m for m in MODULES if floor(m) < FLOORS['app']]:
        assert not imports_argparse((PKG/(m.replace('.', '/') + '.py')).read_text()), \
            f"ragnb.{m} imports argparse: its options belong to a command in ragnb.app.commands"


def ragnb_imports(src:str) -> list:
    "(module, name) of every `from ragnb... import name` in `src` (a notebook's magics and shell lines left out)."
    src = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!')))
    try: tree = ast.parse(src)
    except SyntaxError: return []
    return [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and (n.module or '').startswith('ragnb') for a in n.names if a.name != '*']

def test_every_import_of_a_ragnb_name_resolves():
    ("A name moved or pruned from a module breaks no test, bench script, tool or lesson that imports it from there "
     "(the live tests and the bench scripts do not run here, so they are read, not run).")
    import importlib
    assert ragnb_imports("%time x\nfrom ragnb.core.llm import LLM, image_part\nimport os\n") == \
        [('ragnb.core.llm', 'LLM'), ('ragnb.core.llm', 'image_part')]
    root = PKG.parent
    srcs = [(p, p.read_text()) for d in ('tests', 'bench', 'tools') for p in (root/d).rglob('*.py')]
    srcs += [(p, ''.join(c['source'])) for p in (root/'nbs').glob('*.ipynb')
             for c in json.loads(p.read_text())['cells'] if c['cell_type'] == 'code']
    missing = set()
    for p, src in srcs:
        for mod, name in ragnb_imports(src):
            m = importlib.import_module(mod)
            if not hasattr(m, name) and not (hasattr(m, '__path__') and importlib.util.find_spec(f'{mod}.{name}')):
                missing.add(f'{p.relative_to(root)}: from {mod} import {name}')
    assert not missing, sorted(missing)
