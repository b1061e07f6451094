"""Peak memory of `ragnb metrics FILE` per MB of input (issue 40): RAGChecker's example output, its results repeated
with their own query_ids, written at several sizes; each size scored in a fresh interpreter, end to end.

    python bench/metrics_memory.py [MB ...]      # default: 10 40 160

Prints, per size: the file's MB, the command's peak RSS (MB), the same for an empty-ish file (the interpreter and
libraries: the baseline), and (peak - baseline) / file MB, the figure JOURNAL.md states as the limit.
"""
import json, resource, subprocess, sys, tempfile
from pathlib import Path

from ragnb.core.samples import sample_path

def write(path:Path, mb:float) -> float:
    "RAGChecker's example results, repeated with new query_ids until the file holds about `mb` MB; its size in MB."
    example = json.loads(sample_path('ragchecker', 'examples', 'checking_outputs.json').read_text())['results']
    for r in example: r.pop('metrics', None)
    one = sum(len(json.dumps(r)) for r in example) / len(example)
    n = max(2, int(mb * 1e6 / one))
    rows = [dict(example[i % len(example)], query_id=f'q{i}') for i in range(n)]
    path.write_text(json.dumps({'results': rows}))
    return path.stat().st_size / 1e6

def peak(path:Path) -> float:
    "Peak RSS in MB of `ragnb metrics path` in a fresh interpreter."
    code = ("import resource, sys; from ragnb.app.cli import main; rc = main(['metrics', sys.argv[1]]); "
            "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rc, file=sys.stderr)")
    r = subprocess.run([sys.executable, '-c', code, str(path)], capture_output=True, text=True)
    line = [l for l in r.stderr.splitlines() if l.startswith('PEAK')]
    if not line: sys.exit(f"ragnb metrics {path} failed: {r.stderr[-800:]}")
    return int(line[-1].split()[1]) / 1024

if __name__ == '__main__':
    sizes = [float(a) for a in sys.argv[1:]] or [10, 40, 160]
    with tempfile.TemporaryDirectory() as d:
        base_file = Path(d)/'base.json'; write(base_file, 0.01)
        base = peak(base_file)
        print(f"baseline (interpreter, libraries, a 2-result file): {base:.0f} MB")
        print(f"{'file MB':>8} {'peak MB':>8} {'(peak - baseline) / file':>26}")
        for mb in sizes:
            f = Path(d)/f'{mb:g}.json'; size = write(f, mb)
            p = peak(f); f.unlink()
            print(f"{size:8.1f} {p:8.0f} {(p - base) / size:26.1f}")
