"""Time RAGChecker's 11 metrics over 100,000 synthetic checked results (target: under 10 s).

    python bench/metrics.py [N] [K]
    python bench/metrics.py --vs-ragchecker RAGCHECKER_SRC [N] [RUNS]

The second form compares with RAGChecker's own code on N results (default 20,000: RAGChecker's example output, its
results repeated with their own query_ids and no metrics): RAGChecker's `computation.py` and `metrics.py`, read from a
checkout of github.com/amazon-science/RAGChecker (RAGCHECKER_SRC holds `ragchecker/computation.py`), loading the file
with `json` into a plain dataclass of `container.RAGResult`'s fields (lighter than its dataclasses_json) and
aggregating as its `evaluate` does; against `ragnb metrics FILE`, end to end in a fresh interpreter (start-up, load,
score, print; the best of RUNS, default 3). The overall figures must be identical.
"""
import dataclasses, importlib.util, json, os, subprocess, sys, tempfile, time, types
from pathlib import Path

import numpy as np

from ragnb.check.metrics import LabelBatch, claim_metrics, score
from ragnb.core.samples import sample_path


def ragchecker_modules(src:Path):
    "RAGChecker's `metrics` and `computation` modules from a checkout, with a plain `container.RAGResult`."
    pkg = types.ModuleType('ragchecker'); pkg.__path__ = [str(src/'ragchecker')]
    sys.modules['ragchecker'] = pkg
    def load(name):
        spec = importlib.util.spec_from_file_location(f'ragchecker.{name}', src/'ragchecker'/f'{name}.py')
        m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)
        return m
    metrics = load('metrics')
    container = types.ModuleType('ragchecker.container')
    container.RAGResult = dataclasses.make_dataclass('RAGResult', [
        ('query_id', str), ('query', str), ('gt_answer', str), ('response', str)] + [
        (f, object, dataclasses.field(default=None)) for f in ('retrieved_context', 'response_claims',
         'gt_answer_claims', 'answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')] + [
        ('metrics', dict, dataclasses.field(default_factory=dict))])
    sys.modules['ragchecker.container'] = container
    return metrics, load('computation')


def ragchecker_overall(path:Path, metrics, computation) -> tuple[dict, float]:
    ("RAGChecker's `evaluate` on the results of `path`: every metric of every result, then the rounded means; and the "
     "seconds spent loading the file.")
    t = time.perf_counter()
    results = [computation.RAGResult(**r) for r in json.loads(path.read_text())['results']]
    load = time.perf_counter() - t
    for m in metrics.METRIC_GROUP_MAP[metrics.all_metrics]:
        for r in results: computation.METRIC_FUNC_MAP[m](r)
    return {g: {m: round(np.mean([r.metrics[m] for r in results]) * 100, 1) for m in ms}
            for g, ms in metrics.METRIC_GROUP_MAP.items() if g != metrics.all_metrics}, load


def vs_ragchecker(src:Path, n:int=20_000, runs:int=3):
    example = json.loads(sample_path('ragchecker', 'examples', 'checking_outputs.json').read_text())['results']
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)/f'results_{n}.json'
        rows = [{**example[i % len(example)], 'query_id': str(i), 'metrics': {}} for i in range(n)]
        path.write_text(json.dumps({'results': rows}, indent=2))
        print(f"{n:,} results ({path.stat().st_size / 1e6:.0f} MB), load average {os.getloadavg()[0]:.1f}")
        metrics, computation = ragchecker_modules(src)
        t = time.perf_counter(); theirs, load = ragchecker_overall(path, metrics, computation)
        t_rc = time.perf_counter() - t
        print(f"RAGChecker computation.py (load + metrics): {t_rc:7.1f} s   (load {load:.1f} s, metrics {t_rc - load:.1f} s)")
        best, ours = float('inf'), None
        for _ in range(runs):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, '-c', 'import sys; from ragnb.app.cli import main; sys.exit(main())',
                                'metrics', str(path)], capture_output=True, text=True, cwd=tmp)
            best = min(best, time.perf_counter() - t)
            assert r.returncode == 0, r.stderr[-500:]
            ours = json.loads(r.stdout)
        print(f"ragnb metrics (fresh interpreter, best of {runs}): {best:7.1f} s   {t_rc / best:.0f}x faster "
              f"({(t_rc - load) / best:.0f}x RAGChecker's metrics alone)")
        print("identical overall figures:", ours == theirs)
        if ours != theirs: print("RAGChecker:", theirs, "\nragnb:", ours); sys.exit(1)


if len(sys.argv) > 2 and sys.argv[1] == '--vs-ragchecker':
    vs_ragchecker(Path(sys.argv[2]), *map(int, sys.argv[3:5])); sys.exit()

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
K = int(sys.argv[2]) if len(sys.argv) > 2 else 10   # most chunks per result (RAGChecker's example: 3-4; its paper: 20)
rng = np.random.default_rng(0)
LABELS = np.array(['Entailment', 'Neutral', 'Contradiction'], dtype=object)
P = [0.45, 0.45, 0.10]


def synthetic(n):
    "n results shaped like RAGChecker's: 0-20 response claims, 0-30 ground-truth claims, 0-K chunks."
    nr, ng, k = rng.integers(0, 21, n), rng.integers(0, 31, n), rng.integers(0, K + 1, n)
    nr[::97] = 0; ng[::89] = 0; k[::83] = 0    # some empty cases
    labels = LABELS[rng.choice(3, p=P, size=int(nr.sum() + ng.sum() + (nr * k).sum() + (ng * k).sum()))].tolist()
    out, pos = [], 0
    def take(m):
        nonlocal pos
        pos += m
        return labels[pos - m:pos]
    for i in range(n):
        a2r, r2a = take(nr[i]), take(ng[i])
        out.append(dict(query_id=str(i), answer2response=a2r, response2answer=r2a,
                        retrieved2response=[take(k[i]) for _ in range(nr[i])],
                        retrieved2answer=[take(k[i]) for _ in range(ng[i])],
                        retrieved_context=[{'doc_id': str(j), 'text': ''} for j in range(k[i])]))
    return out


results = synthetic(N)
n_labels = sum(len(r['answer2response']) + len(r['response2answer']) + sum(map(len, r['retrieved2response']))
               + sum(map(len, r['retrieved2answer'])) for r in results)
print(f"{N:,} synthetic results, up to {K} chunks each, {n_labels:,} labels")

t0 = time.perf_counter(); b = LabelBatch.from_results(results); t1 = time.perf_counter()
m = claim_metrics(b); t2 = time.perf_counter()
s = score(results); t3 = time.perf_counter()
print(f"labels -> arrays (validation included): {t1 - t0:6.2f} s")
print(f"11 metrics + extras, vectorised:        {t2 - t1:6.2f} s")
print(f"score() end to end (DataFrame, flags):  {t3 - t2:6.2f} s   (target < 10 s)")
print("overall:", s.overall)
