"Time RAGChecker's 11 metrics over 100,000 synthetic checked results (target: under 10 s)."
import sys, time

import numpy as np

from ragnb.metrics import LabelBatch, claim_metrics, score

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
