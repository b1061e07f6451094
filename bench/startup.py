"""How fast ragnb starts where a user waits: imports, `--version`, a command's `--help`, a tiny `ragnb generate` against
ragnb's scripted server on 127.0.0.1 (answers at once), `ragnb metrics` on RAGChecker's example output, and optionally
`ragnb metrics` on N copies of it and the replayed demo.

Each figure is the wall time of a fresh interpreter, the minimum of R runs (the machine may be busy; the minimum is the
least disturbed), with each tree's ragnb compiled to bytecode first, as an installed package is. Pass one or more source trees to compare them side by side, run by run in turn, e.g. main's tree
(`git worktree add /tmp/main main` or `git archive main | tar -x -C /tmp/main`) and this one:

    python bench/startup.py [--runs 5] [--metrics-n 20000] [--demo] [TREE ...]

A tree is a folder holding the `ragnb` package; without one, the ragnb this script imports is used.
"""
import argparse, compileall, json, os, subprocess, sys, tempfile, time
from pathlib import Path
from ragnb.core.samples import sample_path
from ragnb.testing.scripted import ScriptedServer

DOC = ("# Tides\n\nThe Moon's gravity raises two bulges of water on opposite sides of the Earth. Most coasts see two high "
       "tides and two low tides every lunar day, about 24 hours and 50 minutes.\n")

def ragnb_cmd(*args) -> list:
    "A fresh interpreter running the `ragnb` console command with `args`."
    return [sys.executable, '-c', 'import sys; from ragnb.app.cli import main; sys.exit(main())', *map(str, args)]

def wall(cmd:list, tree, env:dict|None=None, cwd=None) -> float:
    "Seconds `cmd` takes with `tree` first on the path; raises if it fails."
    e = {**os.environ, **(env or {})}
    if tree: e['PYTHONPATH'] = str(tree)
    t = time.perf_counter()
    r = subprocess.run(cmd, env=e, cwd=cwd or tempfile.gettempdir(), capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0: raise RuntimeError(f"{' '.join(cmd[3:]) or cmd}: exit {r.returncode}: {r.stderr[-600:]}")
    return dt

def tasks(tmp:Path, srv, metrics_n:int, demo:bool) -> list:
    "(name, command, env, fresh) of each measurement; `fresh` makes a new output folder per run."
    example = sample_path('ragchecker', 'examples', 'checking_outputs.json')
    docs = tmp/'docs'; docs.mkdir(exist_ok=True); (docs/'tides.md').write_text(DOC)
    gen_env = {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'bench', 'RAGNB_MODEL': 'scripted-test-model'}
    out = [(f'import {m}', [sys.executable, '-c', f'import {m}'], {}, False)
           for m in ('ragnb.synth.generate', 'ragnb.check.checker', 'ragnb.docs.pdf')]
    out += [('ragnb --version', ragnb_cmd('--version'), {}, False),
            ('ragnb generate --help', ragnb_cmd('generate', '--help'), {}, False),
            ('ragnb generate (1 tiny doc, scripted server)',
             ragnb_cmd('generate', docs, '--out', '{out}/qa.jsonl', '--concurrency', 4), gen_env, True),
            ('ragnb metrics (RAGChecker example)', ragnb_cmd('metrics', example), {}, False)]
    if metrics_n:
        d = json.loads(example.read_text())
        big = tmp/f'metrics_{metrics_n}.json'
        big.write_text(json.dumps({'results': [dict(d['results'][i % len(d['results'])], query_id=str(i))
                                               for i in range(metrics_n)]}, indent=2))
        out.append((f'ragnb metrics ({metrics_n:,} results, {big.stat().st_size / 1e6:.0f} MB)',
                    ragnb_cmd('metrics', big), {}, False))
    if demo:
        out.append(('ragnb demo (replayed)', ragnb_cmd('demo', '--mode', 'replayed', '--out', '{out}'),
                    {'OPENAI_BASE_URL': '', 'OPENAI_API_KEY': ''}, True))
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('trees', nargs='*', help='source trees to compare (folders holding the ragnb package)')
    ap.add_argument('--runs', type=int, default=5, help='runs of each measurement (the minimum is shown)')
    ap.add_argument('--metrics-n', type=int, default=0, help='also time `ragnb metrics` on this many results')
    ap.add_argument('--demo', action='store_true', help='also time the replayed demo (3 runs at most)')
    a = ap.parse_args()
    trees = [Path(t).resolve() for t in a.trees] or [None]
    for t in trees:
        if t and not (t/'ragnb'/'__init__.py').exists(): sys.exit(f"{t}: no ragnb package there")
        # bytecode first, as an installed package has it (with PYTHONDONTWRITEBYTECODE every run would compile ragnb)
        compileall.compile_dir(str((t or Path(__import__('ragnb').__file__).parents[1])/'ragnb'), quiet=1)
    with ScriptedServer() as srv, tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = []
        for name, cmd, env, fresh in tasks(tmp, srv, a.metrics_n, a.demo):
            runs = min(a.runs, 3) if name.startswith('ragnb demo') else a.runs
            best = [float('inf')] * len(trees)
            for r in range(runs):
                for i, t in enumerate(trees):   # trees in turn, so a busy spell hits both
                    o = tmp/f'out-{i}-{r}-{len(rows)}'; o.mkdir()
                    e = {**env, 'RAGNB_CACHE_DIR': str(o/'cache')} if fresh else env
                    best[i] = min(best[i], wall([c.replace('{out}', str(o)) for c in cmd], t, e))
            rows.append((name, best))
            print(f"{name:48s}" + ''.join(f"{b:9.2f} s" for b in best), flush=True)
    print(f"\nmin of {a.runs} runs (demo: {min(a.runs, 3)}); columns: "
          + ', '.join(str(t) if t else 'this ragnb' for t in trees) + f"; load average {os.getloadavg()[0]:.1f}")

if __name__ == '__main__': main()
