"The rooms of the package: who imports whom (no cycles, floors respected, the scripted model out of the stages)."
import ast, subprocess, sys
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1]/'ragnb'
MODULES = sorted(p.stem for p in PKG.glob('*.py') if p.stem not in ('__init__', '_modidx'))
# Each module's floor (see DEVELOPING.md): a module may import only modules on its own floor or below.
FLOORS = {'display': 1, 'safe': 1, 'lazy': 1, 'llm': 1, 'batch': 1, 'engine': 1, 'prompts': 1, 'documents': 1, 'pages': 1, 'evidence': 1, 'metrics': 1, 'samples': 1,
          'generate': 2, 'diversity': 2, 'pdf': 2, 'office': 2, 'checker': 2, 'metaeval': 2,
          'plots': 3, 'multimodal': 3, 'retrieval': 3, 'rag': 3,
          'widgets': 4, 'trace': 4, 'systems': 4, 'audit': 4,
          'scripted': 5, 'cli': 5, 'demo': 5, 'local': 5}
ENTRY = {'scripted', 'cli', 'demo'}  # may import the scripted model

def imports(mod, top_only):
    "ragnb modules imported by `mod` (at module level only, or anywhere), with the names taken from each."
    tree = ast.parse((PKG/f'{mod}.py').read_text())
    nodes = tree.body if top_only else list(ast.walk(tree))
    out = []
    for n in nodes:
        if isinstance(n, ast.ImportFrom):
            name = n.module or ''
            if n.level == 1 or name.startswith('ragnb.') or name == 'ragnb':
                target = name.split('.')[-1] if (n.level or name != 'ragnb') else None
                for a in n.names: out.append((target or a.name, a.name))
        elif isinstance(n, ast.Import):
            out += [(a.name.split('.')[1], None) for a in n.names if a.name.startswith('ragnb.')]
    return [(t, name) for t, name in out if t in MODULES and t != mod]

def test_every_module_has_a_floor():
    assert not [m for m in MODULES if m not in FLOORS], 'add the new module to FLOORS (and to DEVELOPING.md)'

def test_no_import_cycles():
    graph = {m: {t for t, _ in imports(m, top_only=True)} for m in MODULES}
    state = {}
    def visit(m, path):
        if state.get(m) == 'done': return
        assert state.get(m) != 'open', f"import cycle: {' -> '.join(path + [m])}"
        state[m] = 'open'
        for t in sorted(graph[m]): visit(t, path + [m])
        state[m] = 'done'
    for m in MODULES: visit(m, [])

@pytest.mark.parametrize('mod', MODULES)
def test_floors_and_private_names(mod):
    for target, name in imports(mod, top_only=False):
        assert FLOORS.get(target, 0) <= FLOORS.get(mod, 0), f"{mod} (floor {FLOORS.get(mod)}) imports {target} (floor {FLOORS.get(target)})"
        assert not (name or '').startswith('_'), f"{mod} imports the private name {name} from {target}"
        if mod not in ENTRY: assert target != 'scripted', f"{mod} imports the scripted model"

def test_each_module_imports_alone():
    code = ';'.join(f"import ragnb.{m}" for m in MODULES)
    for m in MODULES:  # a fresh interpreter per module, so no module is importable only because another ran first
        r = subprocess.run([sys.executable, '-c', f'import ragnb.{m}'], capture_output=True, text=True)
        assert r.returncode == 0, f'ragnb.{m}: {r.stderr[-800:]}'
