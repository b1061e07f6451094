"""Issue 51: does the small judge's own confidence (the probability of its Yes or No) point at its mistakes?

    python bench/judge_confidence.py --record   # starts `ragnb local serve` itself; ~15-25 min on 2 cores
    python bench/judge_confidence.py            # the committed recording: the tables, no model needed

Active labelling asks a person first about the decisions where a label is most informative: where the judge is likely
wrong. Whether that beats today's uniform plan depends on how well the signal separates the judge's mistakes from its
right answers. Two signals are measured here on the same decisions, with the same judge (`small@2`, one claim per call):

- `agreement`: the share of the 7 other prompt versions recorded in `bench/recordings/judge_hard.sqlite` that gave
  the other answer (no extra call; "the agreement of two prompt versions" when only one other is at hand);
- `logprob`: 1 - the probability the model gave its own answer's first token (Yes or No, the top-5 alternatives
  summed by their words), asked once more with `logprobs` (llama-cpp-python's server returns them, as OpenAI does).

Decisions: RAGChecker's example (217), `judge_hard_cases.json` (71) and `judge_heldout_cases.json` (49), each with its
reference label. `--record` sends each claim once (temperature 0, 1 token, top 5 log-probabilities) to the local
model and writes `bench/recordings/judge_confidence.json` (the probabilities and the replies, in task order); a rerun
only reads it. Printed per set and signal: the judge's error rate by level of the signal, and the interval width of
an estimate of the entailed share with labels drawn with probability proportional to sqrt(signal) mixed with uniform,
against uniform labels (below 1 is narrower), and with each level's error rate known in place of the signal (the
best a plan drawing by this signal's levels can do).
"""
import argparse, json, math, sys, time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import judge_hard as jh   # noqa: E402  (the cases, the example's tasks and the recorded prompt versions)
from ragnb.check.checker import claim_text, small_checker, small_prompt   # noqa: E402
from ragnb.core.llm import LLM, Pacing, Endpoint   # noqa: E402
from ragnb.core.prompts import get_prompt   # noqa: E402

OUT = HERE/'recordings'/'judge_confidence.json'
JUDGE = 'small@2'


def sets() -> dict:
    "name -> (tasks, reference labels in task order)."
    out = {'example': jh.example_tasks(), 'hard': jh.tasks(jh.HERE/'judge_hard_cases.json'),
           'heldout': jh.tasks(jh.HERE/'judge_heldout_cases.json')}
    return {k: (ts, [l for _, l in gold]) for k, (ts, gold) in out.items()}


def recorded_answers(ts) -> dict:
    "config -> labels in task order, for every prompt version whose replay covers every claim."
    out = {}
    for cfg, prompt in jh.CONFIGS.items():
        llm = LLM(base_url='http://127.0.0.1:9/v1', endpoint=Endpoint(cache_endpoint=jh.ENDPOINT), api_key='replay',
                  model=jh.MODEL, cache_path=jh.REC, replay=True, progress=False, pacing=Pacing(concurrency=1))
        got = [l for o in small_checker(llm, prompt=prompt)(ts) for l in (o.labels or [None] * len(o.replies))]
        if all(g is not None for g in got): out[cfg] = got
    return out


def p_yes(top:list) -> float|None:
    "P(Yes) among Yes and No from the first token's top alternatives [(token, logprob)], or None when neither is there."
    yes = sum(math.exp(lp) for t, lp in top if t.strip().lower().strip('.') == 'yes')
    no = sum(math.exp(lp) for t, lp in top if t.strip().lower().strip('.') == 'no')
    return yes / (yes + no) if yes + no > 0 else None


def record(data:dict):
    from openai import OpenAI
    from ragnb.app.local import LocalServer
    srv = LocalServer(threads=1).start()
    try:
        client = OpenAI(base_url=srv.base_url, api_key=srv.api_key)
        p = get_prompt(small_prompt(JUDGE))
        for name, (ts, gold) in sets().items():
            rows = data.setdefault(name, [])
            todo = [(t, c) for t in ts for c in t.claims][len(rows):]
            t0 = time.perf_counter()
            for k, (t, c) in enumerate(todo):
                msgs = p.messages(question=t.question, reference=t.reference, claim=claim_text(c))
                r = client.chat.completions.create(model=srv.model, messages=msgs, max_tokens=1, temperature=0,
                                                   logprobs=True, top_logprobs=5)
                ch = r.choices[0]
                first = ch.logprobs.content[0] if ch.logprobs and ch.logprobs.content else None
                top = [(a.token, a.logprob) for a in first.top_logprobs] if first else []
                rows.append(dict(reply=ch.message.content, top=top, p_yes=p_yes(top)))
                OUT.write_text(json.dumps(data, indent=0))   # after every call: an interrupted run keeps its part
                if k % 20 == 0: print(f"{name}: {len(rows)}/{len(rows) - k + len(todo) - 1} "
                                      f"{time.perf_counter() - t0:.0f} s", flush=True)
    finally: srv.stop()


def width_ratio(err:np.ndarray, u:np.ndarray, tau:float) -> float:
    ("Interval width of the estimate with labels drawn with probability ~ tau/N + (1-tau) sqrt(u)/sum, over that "
     "with uniform labels, for the same number of labels (with-replacement variances, the error rates known).")
    a = np.sqrt(np.clip(u, 0, None))
    p = tau / len(u) + (1 - tau) * (a / a.sum() if a.sum() > 0 else 1 / len(u))
    return float(np.sqrt((err / p).sum() / (len(err) * err.sum())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--record', action='store_true', help='start the local model and ask what is not recorded yet')
    a = ap.parse_args()
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    if a.record: record(data)
    for name, (ts, gold) in sets().items():
        g = np.array([l == 'Entailment' for l in gold])
        others = recorded_answers(ts)
        j = np.array([l == 'Entailment' for l in others.pop(JUDGE)])
        err = (j != g).astype(float)
        signals = {'agreement': np.mean([np.array([l == 'Entailment' for l in v]) != j for v in others.values()],
                                        axis=0) if others else None}
        rows = data.get(name, [])
        if len(rows) == len(g):
            py = np.array([r['p_yes'] if r['p_yes'] is not None else 0.5 for r in rows])
            mine = np.where(j, py, 1 - py)   # the probability of the judge's own answer
            signals['logprob'] = 1 - mine
            said = np.array([(r['reply'] or '').strip().lower().startswith('yes') for r in rows])
            print(f"{name}: the logprob call's first token agrees with the recorded answer on "
                  f"{(said == j).mean():.0%} of {len(j)}")
        print(f"\n{name}: {len(g)} decisions, the judge ({JUDGE}) wrong on {err.mean():.1%}")
        for s, u in signals.items():
            if u is None: continue
            bins = np.unique(np.quantile(u, [0, .5, .75, .9, 1]))
            part = ', '.join(f"{lo:.2f}-{hi:.2f}: {err[(u >= lo) & (u <= hi)].mean():.0%} of "
                             f"{((u >= lo) & (u <= hi)).sum()}" for lo, hi in zip(bins, bins[1:]))
            auc = _auc(u, err)
            ratios = ', '.join(f"tau {t}: {width_ratio(err, u, t):.2f}" for t in (0.2, 0.5))
            level = np.digitize(u, bins[1:-1], right=True)   # each decision's level, its error rate known
            known = np.array([err[level == k].mean() for k in level])
            print(f"  {s:<9} AUC {auc:.2f}; wrong by level: {part}; width vs uniform: {ratios}; "
                  f"with each level's error rate known: {width_ratio(err, known, 0.0):.2f}")


def _auc(score, err) -> float:
    "How often a wrong decision has a higher signal than a right one (ties count half)."
    pos, neg = score[err == 1], score[err == 0]
    if not len(pos) or not len(neg): return float('nan')
    return float(((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (len(pos) * len(neg)))


if __name__ == '__main__': main()
