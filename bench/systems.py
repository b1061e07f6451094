"run_system's overhead per question and its use of concurrency, and compare()'s bootstrap time on many questions."
import asyncio, sys, time

import numpy as np
import pandas as pd

from ragnb.check.metrics import METRICS
from ragnb.rag.systems import _intervals, run_system

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000     # questions
LATENCY = 0.02                                          # seconds a simulated system takes per question
qs = pd.DataFrame({'question': [f'question {i}' for i in range(N)], 'answer': 'an answer'})


def instant(q): return 'an answer', ['a passage']

print(f"{N:,} questions")
t0 = time.perf_counter(); run = run_system(qs, instant, concurrency=1, progress=False); t = time.perf_counter() - t0
print(f"overhead: a system that returns at once, concurrency 1: {t:.2f} s, {t / N * 1e3:.3f} ms per question")

n = 200   # questions for the latency runs
for kind in ('sync', 'async'):
    def slow(q): time.sleep(LATENCY); return instant(q)
    async def aslow(q): await asyncio.sleep(LATENCY); return instant(q)
    for c in (1, 4, 16):
        t0 = time.perf_counter()
        run_system(qs.head(n), slow if kind == 'sync' else aslow, concurrency=c, progress=False)
        t = time.perf_counter() - t0
        print(f"{kind:5} system, {LATENCY * 1e3:.0f} ms a question, {n} questions, concurrency {c:2}: {t:.2f} s "
              f"(ideal {n * LATENCY / c:.2f} s)")

rng = np.random.default_rng(0)
for m in (1_000, 10_000):
    per = {s: pd.DataFrame(rng.random((m, len(METRICS))) * 100, columns=list(METRICS), index=[str(i) for i in range(m)])
           for s in ('a', 'b', 'c')}
    t0 = time.perf_counter(); _intervals(per, 'a', 0.95, 2000, 0); t = time.perf_counter() - t0
    print(f"compare's intervals, 3 systems x 11 metrics, {m:,} questions, 2,000 resamples: {t:.2f} s")
