"""Issue 33: do a person's labels correct the judge, and do the intervals hold the truth as often as they say?

    python bench/corrected_metrics.py               # ~5 min on 2 cores; --reps to trade time for precision

The truth is RAGChecker's example output (its labels stand for a person's). Each judge's decisions over the same claims
are corrected by labels taken from the truth for a random sample of whole claims (the first claims of `label_plan` with
a new seed each repetition, as many as fit in the budget of 50, 100 or 200 decisions); the truth is the metric the
example's own labels give over every claim, i.e. what labelling everything would give. Judges:

- `small` and `default`: the local model's (Qwen2.5-Coder-1.5B) real decisions with each judge profile, replayed from
  issue 41's committed recording (`bench/recordings/judge_speed.sqlite`; no model needed);
- `yes-sayer`: a simulated judge that flips a third of the Neutral decisions to Entailment and a tenth of the
  Entailments to Neutral (independently, seeded);
- `tiled`: the example tiled 25 times (50 results, 1,150 claims, 5,425 decisions), each copy with its own yes-sayer
  errors: the same budgets are then a small share of the set, as in real use.

Per judge and budget: the mean absolute error of the judge-only and the corrected figures (percent points, over the
metrics of each method), how often the 95% interval held the truth, and the interval's mean width.
"""
import argparse, copy, sys, time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ragnb.check.corrected import (Labels, corrected_metrics, dataset_fingerprint, label_plan, reference_labels,
                                   claim_refs, PPI_METRICS, simulated_judge)
from ragnb.check.metrics import load_results
from ragnb.core.samples import sample_path

FIELDS = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')


yes_sayer = simulated_judge   # flips a third of the Neutral decisions up, a tenth of the Entailments down


def tiled(results, n):
    out = []
    for i in range(n):
        for r in copy.deepcopy(results): r.query_id = f"{r.query_id}-{i}"; out.append(r)
    return out


def local_judge(profile):
    "The local model's decisions with `profile`, replayed from issue 41's recording (None if it cannot be replayed)."
    import judge_speed as js
    from ragnb.check.checker import run_checks
    from ragnb.core.llm import LLM, Pacing
    import json
    server = json.loads(js.SERVER.read_text()) if js.SERVER.exists() else {}
    prof, _ = js.CONFIGS[profile]   # 'small' is the recording's small@1, whatever `small` means today
    url = server.get('_endpoints', {}).get(profile) or server.get('_endpoint', 'http://127.0.0.1:9/v1')
    llm = LLM(base_url=url, api_key='local', model=js.MODEL, cache_path=js.REC, replay=True, progress=False,
              pacing=Pacing(concurrency=1))
    run = run_checks(js.results(2), llm, judge_profile=prof, claims_per_call=1)
    if any(r.ragnb.get('failures') for r in run.results): return None
    return run.results


def take(results, seed, budget, whole:int|None=None):
    "Whole claims from the front of a seeded plan while their decisions fit in `budget` (or the first `whole` claims)."
    index, claims, used = {r.query_id: r for r in results}, [], 0
    for q, s, i in label_plan(results, seed):
        k = len(claim_refs(index[q], s))
        if (used + k > budget) if whole is None else len(claims) >= whole: break
        claims.append((q, s, i)); used += k
    return claims


def run(name, judged, truth, budgets, reps, draws, boot, claims=False):
    exact = corrected_metrics(truth, None).table.judge
    fp, rows = dataset_fingerprint(judged), []
    for budget in budgets:
        for rep in range(reps):
            picked = take(judged, 1000 + rep, budget) if not claims else take(judged, 1000 + rep, 0, whole=budget)
            lab = Labels(fp, reference_labels(truth, picked))
            t = corrected_metrics(judged, lab, draws=draws, boot=boot, seed=rep).table
            for m, r in t.iterrows():
                rows.append(dict(judge=name, budget=budget, metric=m, method=r.method, err_judge=abs(r.judge - exact[m]),
                                 err_corrected=abs(r.corrected - exact[m]),
                                 covered=float(r.low - 1e-9 <= exact[m] <= r.high + 1e-9) if r.low == r.low else np.nan,
                                 width=r.high - r.low,
                                 withheld=not (r.low == r.low), coherent=bool(r.low != r.low or (
                                     0 <= r.low <= r.corrected <= r.high <= 100))))
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--reps', type=int, default=100, help='random label samples per judge and budget')
    ap.add_argument('--budgets', default='50,100,200', help='decisions labelled')
    ap.add_argument('--claims', default='', help='whole claims labelled instead, e.g. 1,3,10,40,200 (issue 51)')
    ap.add_argument('--judges', default='small,default,yes-sayer,tiled', help='which judges')
    ap.add_argument('--draws', type=int, default=40, help='imputation draws (calibrated metrics)')
    ap.add_argument('--boot', type=int, default=100, help='bootstrap resamples (calibrated intervals)')
    a = ap.parse_args()
    budgets = [int(b) for b in (a.claims or a.budgets).split(',')]
    want = a.judges.split(',')
    truth = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))
    judges = {}
    for p in [p for p in ('small', 'default') if p in want]:
        j = local_judge(p)
        if j is None: print(f"{p}: the recording does not cover every call; left out", file=sys.stderr)
        else: judges[p] = j
    if 'yes-sayer' in want: judges['yes-sayer'] = yes_sayer(truth)
    big = tiled(truth, 25)
    if 'tiled' in want: judges['tiled'] = yes_sayer(big, seed=2)
    t0, out = time.perf_counter(), []
    for name, judged in judges.items():
        ref = big if name == 'tiled' else truth
        out.append(run(name, judged, ref, budgets, a.reps, a.draws, a.boot, claims=bool(a.claims)))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    d = pd.concat(out)
    g = d.groupby(['judge', 'budget', 'method'], sort=False).agg(
        metrics=('metric', 'nunique'), err_judge=('err_judge', 'mean'), err_corrected=('err_corrected', 'mean'),
        coverage=('covered', 'mean'), width=('width', 'mean'), withheld=('withheld', 'mean'),
        incoherent=('coherent', lambda c: int((~c.astype(bool)).sum())))
    g['withheld'] = (100 * g.withheld).round(0)
    g['coverage'] = (100 * g.coverage).round(0)
    print(f"\n{a.reps} random samples per judge and {'number of whole claims' if a.claims else 'budget'}; errors and "
          "widths in percent points; coverage in % of the figures with an interval (target 95); withheld: % of figures "
          "left at the judge's for want of labels; incoherent: figures outside their interval or 0-100\n")
    print(g.round(1).to_string())
    print('\nper metric, all judges and budgets pooled (coverage %):')
    print((100 * d.groupby(['metric', 'method']).covered.mean()).round(0).to_string())
    if a.claims:
        print('\nper metric and number of labelled claims, all judges pooled: mean error judge -> corrected, coverage %')
        m = d.groupby(['metric', 'budget']).agg(judge=('err_judge', 'mean'), corrected=('err_corrected', 'mean'),
                                                 coverage=('covered', 'mean'))
        m['coverage'] = (100 * m.coverage).round(0)
        print(m.round(1).unstack('budget').to_string())


if __name__ == '__main__': main()
