"Style checked in CI: no line of the exported modules over 120 characters, no unused import (ruff's E501 and F401,\nconfigured in pyproject.toml)."
import ast, importlib.util, json, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
CELL = re.compile(r'# %% (?:\.\./)+nbs/(\S+\.ipynb) #(\w+)')

def nbdev_lines(src):
    ("Line numbers nbdev writes itself: the module docstring (the notebook's `> subtitle`), after the `__version__` "
     "nbdev puts first in the package's `__init__.py`, and `__all__`.")
    tree, out = ast.parse(src), set()
    first = 1 if tree.body and isinstance(tree.body[0], ast.Assign) and \
        [getattr(t, 'id', None) for t in tree.body[0].targets] == ['__version__'] else 0
    for i, n in enumerate(tree.body):
        doc = i == first and isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        if doc or (isinstance(n, ast.Assign) and any(getattr(t, 'id', None) == '__all__' for t in n.targets)):
            out.update(range(n.lineno, n.end_lineno + 1))
    return out

def source_cell(lines, row):
    "(notebook, cell id) that exported line `row` of a module: the nearest `# %% ../nbs/...` marker above it."
    for l in reversed(lines[:row]):
        if m := CELL.match(l): return m.groups()
    return None, None

def ruff_findings(code='E501'):
    ("{notebook: ['ragnb/x.py:row (cell id): message', ...]} of ruff's findings with `code` (pyproject.toml selects "
     "E501, a line over 120 characters, and F401, an unused import), without the lines nbdev writes.")
    assert importlib.util.find_spec('ruff'), 'ruff is missing: pip install -e ".[dev]"'
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'json', '--no-cache', 'ragnb'],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    out = {}
    for v in json.loads(r.stdout):
        path = Path(v['filename']); src = path.read_text(encoding='utf-8'); row = v['location']['row']
        assert v['code'] in ('E501', 'F401'), v
        if v['code'] != code or row in nbdev_lines(src): continue
        nb, cell = source_cell(src.splitlines(), row)
        out.setdefault(nb, []).append(f"{path.relative_to(ROOT).as_posix()}:{row} (nbs/{nb} cell {cell}): {v['message']}")
    return out

def test_no_long_lines():
    bad = [l for ls in ruff_findings().values() for l in ls]
    assert not bad, f"{len(bad)} lines over 120 characters; wrap them in the notebook cell, then nbdev_export:\n" + '\n'.join(bad)

def test_no_unused_imports():
    ("An exported cell imports only what its module uses: a name only the lesson's other cells use is imported in the "
     "lesson's plain import cell, so the module does not seem to offer it (and another module does not import it "
     "from there).")
    bad = [l for ls in ruff_findings('F401').values() for l in ls]
    assert not bad, f"{len(bad)} unused imports; move each to the lesson's import cell, then nbdev_export:\n" + '\n'.join(bad)

def test_nbdev_lines_are_left_out():
    src = '"""A subtitle that nbdev copies from the notebook, however long."""\n\n__all__ = [\'a\', \'b\']\nx = 1\n'
    assert nbdev_lines(src) == {1, 3}
    assert source_cell(['# %% ../nbs/30_generate.ipynb #abc123', 'x = 1'], 2) == ('30_generate.ipynb', 'abc123')

MAX_CELL = 60   # lines of an exported cell, its directives included (issue 52: a lesson shows a definition at a time)

def long_cells(cells:list) -> list:
    "(cell id, lines) of the exported code cells of `cells` (a notebook's) longer than `MAX_CELL`."
    out = []
    for c in cells:
        src = ''.join(c['source'])
        if c['cell_type'] == 'code' and re.match(r'#\|\s*export', src) and src.count('\n') + 1 > MAX_CELL:
            out.append((c.get('id'), src.count('\n') + 1))
    return out

def test_exported_cells_are_short():
    cell = lambda n, d='#| export': dict(cell_type='code', id=f'c{n}', source=[d + '\n'] + ['x = 1\n'] * (n - 2) + ['x'])
    assert long_cells([cell(60), cell(61), cell(61, '#| exporti'), cell(90, 'x = 2')]) == [('c61', 61), ('c61', 61)]
    bad = [f"nbs/{p.name} cell {i}: {n} lines" for p in sorted((ROOT/'nbs').glob('*.ipynb'))
           for i, n in long_cells(json.loads(p.read_text())['cells'])]
    assert not bad, (f"exported cells over {MAX_CELL} lines; split each at a definition, or move a helper out "
                     "(a class's later methods can follow as `@patch` functions):\n" + '\n'.join(bad))
