"""How big ragnb's public surface is next to its use: `__all__` per module and in total, the exported names used nowhere
outside their own module and notebook, the biggest exported cells (lines) with their notebook, and notebook sizes.

A name counts as used outside when it occurs as a whole word in another module of ragnb/, another notebook of nbs/,
tests/, bench/, tools/, README.md, DEVELOPING.md, JOURNAL.md or docs/ (text files).

    python bench/surface.py [--top 15]
"""
import argparse, ast, json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG, NBS = ROOT/'ragnb', ROOT/'nbs'
EXPORT = re.compile(r'^#\|\s*exporti?\b')  # `#| export` and `#| exporti`: code of the module

def module_all(py:Path) -> list:
    "The names in `py`'s `__all__` (nbdev writes it as one literal list)."
    for n in ast.parse(py.read_text()).body:
        if isinstance(n, ast.Assign) and any(getattr(t, 'id', None) == '__all__' for t in n.targets):
            return list(ast.literal_eval(n.value))
    return []

def cells(nb:Path) -> list:
    "The code cells of notebook `nb` as lists of lines."
    return [''.join(c['source']).splitlines() for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']

def default_exp(nb:Path) -> str|None:
    "The module notebook `nb` exports to, if any."
    for src in cells(nb):
        for line in src:
            if m := re.match(r'^#\|\s*default_exp\s+(\S+)', line): return m.group(1)   # dotted: 'core.llm'
    return None

def dotted(p:Path) -> str: return '.'.join(p.relative_to(PKG).with_suffix('').parts)   # 'core.llm'

def texts() -> dict:
    "Every text this measure searches for uses, keyed by path (code cells only for notebooks)."
    out = {p: p.read_text() for p in PKG.rglob('*.py') if p.stem not in ('_modidx',)}
    out |= {p: '\n'.join('\n'.join(c) for c in cells(p)) for p in NBS.glob('*.ipynb')}
    for d in ('tests', 'bench', 'tools', 'docs'):
        for p in (ROOT/d).rglob('*'):
            if p.is_file() and p.suffix in ('.py', '.md', '.qmd', '.txt', '.sh', '.yml'):
                if p != Path(__file__).resolve(): out[p] = p.read_text(errors='replace')
    for f in ('README.md', 'DEVELOPING.md', 'JOURNAL.md'): out[ROOT/f] = (ROOT/f).read_text()
    return out

def exported_cells(nb:Path) -> list:
    "(lines, first defined name) of each `#| export` or `#| exporti` cell of `nb`."
    out = []
    for src in cells(nb):
        if not (src and any(EXPORT.match(l) for l in src[:3])): continue
        body = [l for l in src if not l.startswith('#|')]
        defs = (m.group(1) for l in body if (m := re.match(r'^(?:async\s+)?(?:def|class)\s+(\w+)', l)))
        name = next(defs, None) or next((m.group(1) for l in body if (m := re.match(r'^(\w+)\s*[:=]', l))), '?')
        out.append((len(body), name))
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--top', type=int, default=15, help='how many of the biggest exported cells to list')
    a = ap.parse_args()
    nb_of = {m: nb for nb in sorted(NBS.glob('*.ipynb')) if (m := default_exp(nb))}
    alls = {dotted(p): module_all(p) for p in sorted(PKG.rglob('*.py')) if p.stem not in ('__init__', '_modidx')}
    ts = texts()
    unused = {}
    for mod, names in alls.items():
        own = {PKG/(mod.replace('.', '/') + '.py'), nb_of.get(mod)}
        others = '\n'.join(t for p, t in ts.items() if p not in own)
        unused[mod] = [n for n in names if not re.search(rf'(?<!\w){re.escape(n)}(?!\w)', others)]
    print('__all__ per module (size, unused outside its module and notebook):')
    for mod, names in sorted(alls.items(), key=lambda kv: -len(kv[1])):
        print(f'  {mod:18} {len(names):4} {len(unused[mod]):4}')
    print(f'  {"total":18} {sum(map(len, alls.values())):4} {sum(map(len, unused.values())):4}')
    print('\nnames unused outside their module:')
    for mod, names in unused.items():
        if names: print(f'  {mod}: {", ".join(names)}')
    big = sorted(((n, name, nb.name) for nb in NBS.glob('*.ipynb') for n, name in exported_cells(nb)), reverse=True)
    print(f'\nbiggest exported cells (lines without directives):')
    for n, name, nb in big[:a.top]: print(f'  {n:4}  {name:28} {nb}')
    print('\nnotebook sizes (kB, code cells, exported cells):')
    for nb in sorted(NBS.glob('*.ipynb'), key=lambda p: -p.stat().st_size):
        print(f'  {nb.stat().st_size//1024:6}  {len(cells(nb)):4} {len(exported_cells(nb)):4}  {nb.name}')

if __name__ == '__main__': main()
