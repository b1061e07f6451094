"""Render the lessons as a static documentation site: `python tools/build_site.py [--out _docs]`.

nbdev's own `nbdev_docs` needs Quarto, whose PyPI package (`quarto-cli`) is a source distribution that downloads the
binary from GitHub when it builds: it cannot be installed where only package registries are reachable. This script
renders the same notebooks with nbconvert (a dev requirement) and nbdev's `show_doc`, the way nbdev's processors do:
- cells flagged `#| hide` and the `#| default_exp` cell are left out, a cell flagged `#| echo: false` shows its
  outputs alone, and `#|` directive lines are removed;
- after each exported cell, the API reference of every public function and class it defines (`show_doc`: signature,
  docstring and the table of documented parameters);
- a widget's live view is dropped for the static HTML snapshot the viewers publish beside it;
- long text outputs fold into a `<details>` block; links between lessons point at their pages;
- a sidebar lists every page, in the lessons' order, and `cli.html` shows each command's `--help`.
The site goes to settings.ini's `doc_path` (`_docs`, ignored by git). tests/browser/test_site.py builds and checks it.
"""
import argparse, ast, html, re, shutil, subprocess, sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'
FOLD_LINES = 25   # text outputs longer than this many lines fold into a <details> block
WIDGET = 'application/vnd.jupyter.widget-view+json'

def flags(src:str) -> list:
    "The `#|` directives of a cell, e.g. ['export'], ['hide']."
    return [line[2:].strip().split()[0] for line in src.splitlines() if line.startswith('#|') and line[2:].strip()]

def public_defs(src:str) -> list:
    "Names of the public functions and classes a cell defines at top level."
    try: tree = ast.parse(src)
    except SyntaxError: return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not n.name.startswith('_')]

def api_cell(module:str, names:list):
    "A markdown cell with nbdev's `show_doc` of each name in `module` (none if the module cannot be imported)."
    from importlib import import_module
    from nbdev.showdoc import show_doc
    try: mod = import_module(f'ragnb.{module}')
    except Exception as e: return nbformat.v4.new_markdown_cell(f'*API reference unavailable: {html.escape(str(e))}*')
    docs = []
    for n in names:
        if not hasattr(mod, n): continue
        try: md = show_doc(getattr(mod, n))._repr_markdown_()
        except Exception: md = f'### {n}\n\n*{html.escape(getattr(mod, n).__doc__ or "")}*'
        docs.append('\n'.join(line for line in md.splitlines() if '{target=' not in line))   # Quarto's source link
    return nbformat.v4.new_markdown_cell('\n\n'.join(docs)) if docs else None

def fold(text:str) -> dict:
    "A long text output as an HTML output that folds."
    lines = text.splitlines()
    summary = f'output: {len(lines)} lines (click to show)'
    return nbformat.v4.new_output('display_data', data={'text/html':
        f'<details><summary>{summary}</summary><pre>{html.escape(text)}</pre></details>'})

def page_links(md:str) -> str:
    "Markdown whose links to lessons (`x.ipynb`) point at their pages (`x.html`)."
    return re.sub(r'\(([\w.-]+)\.ipynb(#[^)]*)?\)', r'(\1.html\2)', md)

def clean_outputs(outputs:list) -> list:
    out = []
    for o in outputs:
        if o.get('output_type') == 'stream' and o['text'].count('\n') > FOLD_LINES: out.append(fold(o['text'])); continue
        data = o.get('data')
        if data is not None:
            data.pop(WIDGET, None)
            if not data: continue
            txt = data.get('text/plain', '')
            txt = ''.join(txt) if isinstance(txt, list) else txt
            if set(data) == {'text/plain'} and txt.startswith('<Figure size'):
                raise ValueError(f"a figure shown as its text {txt.strip()!r} instead of a picture: draw it with "
                                 "ragnb.view.plots._new_figure (or DisplayFigure) and run the notebook again")
            if set(data) == {'text/plain'} and isinstance(txt, str) and txt.count('\n') > FOLD_LINES:
                out.append(fold(txt)); continue
            if 'text/markdown' in data:   # a table a cell shows: its links between lessons point at pages too
                md = data['text/markdown']
                data['text/markdown'] = page_links(''.join(md) if isinstance(md, list) else md)
        out.append(o)
    return out

def process(nb, module:str|None):
    "The notebook as the site shows it."
    cells = []
    for c in nb.cells:
        f = flags(c.source) if c.cell_type == 'code' else []
        if 'hide' in f or 'default_exp' in f: continue
        if c.cell_type == 'code':
            echo = not re.search(r'^#\|\s*echo:\s*false\s*$', c.source, re.M)   # echo: false shows the result alone
            c.source = '\n'.join(line for line in c.source.splitlines() if not line.startswith('#|')).strip('\n')
            if not echo: c.source, c.metadata['transient'] = '', {'remove_source': True}   # as the remove_input tag
            c.outputs = clean_outputs(c.get('outputs', []))
            if not c.source and not c.outputs: continue
        else: c.source = page_links(c.source).replace('](../docs/', '](docs/')
        cells.append(c)
        if module and c.cell_type == 'code' and ('export' in f or 'exports' in f):
            api = api_cell(module, public_defs(c.source))
            if api is not None: cells.append(api)
    nb.cells = cells
    return nb

def title_of(nb, fallback:str) -> str:
    for c in nb.cells:
        if c.cell_type == 'markdown':
            m = re.search(r'^#\s+(.+)$', c.source, re.M)
            if m: return m[1].strip()
    return fallback

CSS = """<style>
body{margin:0} #ragnb-nav{position:fixed;top:0;left:0;bottom:0;width:230px;overflow-y:auto;background:#f6f7f9;
border-right:1px solid #ddd;padding:12px;font:14px/1.5 system-ui,sans-serif;box-sizing:border-box}
#ragnb-nav a{display:block;color:#1a4b8c;text-decoration:none;padding:2px 4px;border-radius:3px}
#ragnb-nav a.here{background:#dde7f5;font-weight:600} #ragnb-nav b{display:block;margin:6px 0}
.ragnb-page{margin-left:240px} details>summary{cursor:pointer;color:#555}
.jp-RenderedMarkdown .highlight{margin-bottom:1em}  /* a code block in text keeps its distance from the next paragraph */
</style>"""

def nav(pages:list, here:str) -> str:
    here_cls = ' class="here"'
    links = ''.join(f'<a href="{p}"{here_cls if p == here else ""}>{html.escape(t)}</a>' for p, t in pages)
    return f'<nav id="ragnb-nav"><b>ragnb</b>{links}</nav>'

RUN_CLI = 'import sys; from ragnb.app.cli import main; sys.exit(main())'  # the module has no __main__ block

def cli_notebook():
    "A page of every command's `--help`."
    from ragnb.app.cli import COMMANDS
    cells = [nbformat.v4.new_markdown_cell('# Every command\n\n> Every `ragnb` command and its options, with defaults, '
                                           'as `ragnb COMMAND --help` prints them.')]
    for name in ['', *COMMANDS]:
        r = subprocess.run([sys.executable, '-c', RUN_CLI, *([name] if name else []), '--help'],
                           capture_output=True, text=True, timeout=120)
        cmd = f'ragnb {name}'.strip()
        cells.append(nbformat.v4.new_markdown_cell(f'## `{cmd}`'))
        c = nbformat.v4.new_code_cell(f'!{cmd} --help')
        c.outputs = [nbformat.v4.new_output('stream', name='stdout', text=r.stdout or r.stderr)]
        cells.append(c)
    return nbformat.v4.new_notebook(cells=cells, metadata={})

def build(out:Path):
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    files = sorted(NBS.glob('*.ipynb'), key=lambda p: (p.stem != 'index', p.stem))
    notebooks = []
    for p in files:
        if p.name.startswith('_'): continue
        nb = nbformat.read(p, as_version=4)
        m = next((m for c in nb.cells if c.cell_type == 'code'
                  and (m := re.search(r'^#\|\s*default_exp\s+(\S+)', c.source, re.M))), None)
        notebooks.append((p.stem, nb, m[1] if m else None))
    notebooks.append(('cli', cli_notebook(), None))
    pages = [(f'{stem}.html', title_of(nb, stem) if stem != 'index' else 'Home') for stem, nb, _ in notebooks]
    exporter = HTMLExporter(template_name='lab', exclude_input_prompt=True, exclude_output_prompt=True)
    for (stem, nb, module), (page, title) in zip(notebooks, pages):
        try: shown = process(nb, module)
        except ValueError as e: raise SystemExit(f"site build failed: nbs/{stem}.ipynb: {e}") from None
        body, _ = exporter.from_notebook_node(shown, resources={'metadata': {'name': f'{title} · ragnb'}})
        body = re.sub(r'(<body[^>]*>)', lambda m: m[1] + nav(pages, page) + '<div class="ragnb-page">', body, count=1)
        body = body.replace('</body>', '</div></body>').replace('</head>', CSS + '</head>', 1)
        (out/page).write_text(body, encoding='utf-8')
    docs = ROOT/'docs'
    if docs.exists(): shutil.copytree(docs, out/'docs')
    print(f'{len(pages)} pages in {out}')
    return [p for p, _ in pages]

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', type=Path, default=ROOT/'_docs', help='folder to write the site to (default: _docs)')
    build(ap.parse_args().out)
