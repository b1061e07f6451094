"Code-shape figures for the closing notes: lines per module, exported cell sizes, documented parameters, long lines."
import ast, json, re, statistics, sys, tokenize, io
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])

def exported_cells(nb):
    for c in json.loads(nb.read_text())['cells']:
        s = ''.join(c['source'])
        if c['cell_type'] == 'code' and re.match(r'#\|\s*export', s): yield s

def params(path):
    "(documented, total) public function/method parameters; documented = a trailing comment on the parameter's line."
    src = path.read_text(); lines = src.splitlines()
    comments = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.COMMENT}
    doc = tot = 0
    tree = ast.parse(src)
    tops = tree.body + [m for c in tree.body if isinstance(c, ast.ClassDef) and not c.name.startswith('_') for m in c.body]
    for n in tops:  # module-level functions and methods of public classes (not nested helpers)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith('_'):
            for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs:
                if a.arg in ('self', 'cls'): continue
                tot += 1; doc += a.lineno in comments
    return doc, tot

mods = sorted(p for p in (ROOT/'ragnb').rglob('*.py') if p.stem not in ('__init__', '_modidx'))
sizes = [len(s) for nb in sorted((ROOT/'nbs').glob('*.ipynb')) for s in exported_cells(nb)]
d = t = 0
print('| module | lines | documented parameters |\n|---|---|---|')
for m in mods:
    a, b = params(m); d += a; t += b
    print(f"| {m.relative_to(ROOT/'ragnb').with_suffix('').as_posix()} | {len(m.read_text().splitlines())} | {a}/{b} |")
long = sum(len(l) > 120 for m in mods for l in m.read_text().splitlines())
print(f"\nexported cells: {len(sizes)}, median {statistics.median(sizes):.0f} characters, 90th percentile "
      f"{sorted(sizes)[int(.9*len(sizes))]}, largest {max(sizes)}")
print(f"documented public parameters: {d}/{t} ({d/t:.0%}); lines over 120 characters: {long}")
