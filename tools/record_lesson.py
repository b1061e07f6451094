"""Record a lesson's model calls from a real endpoint into `nbs/cache/<name>.sqlite`, and refresh its outputs.

    python tools/record_lesson.py nbs/41_checker.ipynb --base-url http://127.0.0.1:8097/v1 [--fresh]
    python tools/record_lesson.py nbs/41_checker.ipynb --replay    # then: outputs as a reader sees them, offline

Runs the notebook in place with `RAGNB_RECORD=<base_url>` (see `lesson_llm` in nbs/00_scripted.ipynb); cells marked
`#| live` or `#| slow` are not run and keep their outputs, as under `nbdev_test` (`--run-slow` runs the slow ones too,
where their extras are installed). `--fresh` first removes the lesson's cache, so it
holds only the calls the lesson makes now. Prints the calls recorded and their wall time.
"""
import argparse, os, re, sqlite3, sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient

LIVE = re.compile(r'^#\|\s*(live|slow)\s*$', re.M)   # cells nbdev_test skips: they keep their outputs
LIVE_ONLY = re.compile(r'^#\|\s*live\s*$', re.M)

def calls(db:Path) -> int:
    if not db.exists(): return 0
    with sqlite3.connect(db) as c: return c.execute("select count(*) from calls where kind = 'chat'").fetchone()[0]

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('notebook', help='the lesson, e.g. nbs/41_checker.ipynb')
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument('--base-url', help='OpenAI-compatible endpoint serving the lesson\'s `model`')
    how.add_argument('--replay', action='store_true', help='no endpoint: refresh the outputs from the cache, as a reader sees them')
    p.add_argument('--fresh', action='store_true', help='remove the lesson\'s cache first')
    p.add_argument('--run-slow', action='store_true', help='run the `#| slow` cells too (their extras installed)')
    p.add_argument('--allow-errors', action='store_true', help='go on after a failing cell (record every call in one pass, fix the cells after)')
    a = p.parse_args()
    path = Path(a.notebook).resolve()
    db = path.parent/'cache'/f'{path.stem}.sqlite'
    if a.fresh and db.exists(): db.unlink()
    nb = nbformat.read(path, as_version=4)
    run = nbformat.from_dict(nb)   # a copy whose live cells are emptied; outputs of the others are copied back
    skip = LIVE_ONLY if a.run_slow else LIVE
    live = {i for i, c in enumerate(run.cells) if c.cell_type == 'code' and skip.search(c.source)}
    for i in live: run.cells[i].source = ''
    if a.replay: os.environ.pop('RAGNB_RECORD', None)
    else: os.environ['RAGNB_RECORD'] = a.base_url
    before, t0 = calls(db), time.time()
    try: NotebookClient(run, timeout=None, allow_errors=a.allow_errors, store_widget_state=False,  # snapshots suffice
                        resources={'metadata': {'path': str(path.parent)}}).execute()
    finally:
        print(f"{path.name}: {calls(db) - before} calls recorded in {time.time() - t0:.0f} s ({calls(db)} in {db.name})", file=sys.stderr)
    for i, (c, r) in enumerate(zip(nb.cells, run.cells)):
        if c.cell_type == 'code' and i not in live: c.outputs, c.execution_count = r.outputs, r.execution_count
    nbformat.write(nb, path)

if __name__ == '__main__': main()
