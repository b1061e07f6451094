"""Issue 48: the critique agents against a person's labels, both profiles, with the local model.

    python bench/critique_agreement.py --record     # start `ragnb local serve` (one thread), send what is missing
    python bench/critique_agreement.py              # replay the committed recording: the tables, no model needed
    python bench/critique_agreement.py --profiles small --record    # one profile

The cases are `bench/critique_cases.json`: 64 factoid questions, written by hand in the style of a small model's output
(plain questions, answers a passage never states, "the code" and "this section", questions about emoji and authors),
about 10 passages of 8 openai-cookbook articles that no lesson uses, each labelled by hand: grounded (the passage
states the answer), relevant (useful to the default audience) and standalone (clear without the passage). Each
profile runs ragnb's own `critique` on all of them, one call in flight:

- `default`: the seed's three prompts, a rationale and a 1-5 rating each; a score of 3 or more passes (the keep rule)
- `small`: one Yes/No question per criterion, the fixed words first and the question last (`critique_*_yes_no`)

Every reply goes into `bench/recordings/critique_agreement.sqlite`, committed with this script; a rerun replays it.
Printed: per profile and critic, accuracy and Cohen's kappa against the labels, how often it says "pass", failed
calls; the kept decision (all three pass) the same way; calls, prompt and completion tokens and seconds.
"""
import argparse, json, os, sys, time
from pathlib import Path

from ragnb.core.llm import LLM, Pacing, Deadlines, Endpoint
from ragnb.core.prompts import CRITERIA
from ragnb.synth.generate import QA, critique
from ragnb.check.audit import cohen_kappa   # imported before any call: a long run never imports mid-way

HERE = Path(__file__).resolve().parent
CASES = HERE/'critique_cases.json'
REC = HERE/'recordings'/'critique_agreement.sqlite'
TIMES = HERE/'recordings'/'critique_agreement_times.json'
ENDPOINT = 'local-model'   # the name calls are filed under in the recording (the server's port changes)
MODEL = 'qwen2.5-coder-1.5b-instruct-q4_k_m'
LABEL = {'groundedness': 'grounded', 'relevance': 'relevant', 'standalone': 'standalone'}


def questions(doc:dict) -> list:
    "The cases as `QA` records, their passage as the context the question was written from."
    ps = doc['passages']
    return [QA(c['id'], ps[c['passage']]['doc'], ps[c['passage']]['doc'], c['passage'], 0, ps[c['passage']]['text'],
               question=c['question'], answer=c['answer'], evidence=c['evidence']) for c in doc['cases']]


def kappa(a:list, b:list) -> float:
    return round(cohen_kappa(['y' if x else 'n' for x in a], ['y' if x else 'n' for x in b]), 2)


def agreement(pred:list, gold:list) -> dict:
    "Accuracy and kappa over the cases the critic answered; failed ones counted apart."
    pairs = [(p, g) for p, g in zip(pred, gold) if p is not None]
    ps, gs = [p for p, _ in pairs], [g for _, g in pairs]
    return dict(accuracy=round(100 * sum(p == g for p, g in pairs) / max(len(pairs), 1), 1), kappa=kappa(ps, gs),
                says_pass=sum(ps), answered=len(pairs), failed=len(pred) - len(pairs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--record', action='store_true', help='start the local model and send the calls not yet recorded')
    ap.add_argument('--profiles', default='small,default')
    a = ap.parse_args()
    doc = json.loads(CASES.read_text())
    gold = {c: [case[LABEL[c]] for case in doc['cases']] for c in CRITERIA}
    gold_kept = [all(case[LABEL[c]] for c in CRITERIA) for case in doc['cases']]
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    srv, url = None, 'http://127.0.0.1:9/v1'   # replay: nothing is sent
    if a.record:
        from ragnb.app.local import LocalServer
        os.environ.setdefault('RAGNB_LOCAL_THREADS', '1')
        srv = LocalServer(threads=int(os.environ['RAGNB_LOCAL_THREADS'])).start(); url = srv.base_url
        print(f"recording from {srv.model} at {url}", flush=True)
    REC.parent.mkdir(exist_ok=True)
    rows = []
    try:
        for profile in a.profiles.split(','):
            llm = LLM(base_url=url, endpoint=Endpoint(cache_endpoint=ENDPOINT), api_key=srv.api_key if srv else 'replay', model=MODEL,
                      cache_path=REC, replay=not a.record, progress=False, pacing=Pacing(concurrency=1),
                      deadlines=Deadlines(total=1800, first_token=600, idle=120))
            qas = questions(doc)
            t0 = time.perf_counter()
            critique(qas, llm, doc['audience'], profile=profile)
            secs = time.perf_counter() - t0
            u = llm.usage
            if u.calls > u.cached:   # new calls were made: their wall time is this sitting's
                times[profile] = dict(calls=u.calls, new_calls=u.calls - u.cached, seconds=round(secs, 1),
                                      prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)
                TIMES.write_text(json.dumps(times, indent=1))
            for c in CRITERIA:
                pred = [None if getattr(q, f'{c}_score') is None else getattr(q, f'{c}_score') >= 3 for q in qas]
                rows.append(dict(profile=profile, critic=c, **agreement(pred, gold[c])))
            kept = [None if any(getattr(q, f'{c}_score') is None for c in CRITERIA)
                    else all(getattr(q, f'{c}_score') >= 3 for c in CRITERIA) for q in qas]
            rows.append(dict(profile=profile, critic='kept (all three)', **agreement(kept, gold_kept)))
            for r in rows[-4:]: print(json.dumps(r), flush=True)
    finally:
        if srv is not None: srv.stop()
    import pandas as pd
    print(f"\n{len(doc['cases'])} hand-labelled questions; labels pass: "
          + ', '.join(f"{LABEL[c]} {sum(gold[c])}" for c in CRITERIA) + f", all three {sum(gold_kept)}")
    print(pd.DataFrame(rows).set_index(['profile', 'critic']).to_string())
    if times:
        print("\nwhen recorded (one call in flight; the local model on 2 threads; the small run shared the 2 cores with tests):")
        t = pd.DataFrame(times).T
        t['s/call'] = (t.seconds / t.new_calls).round(2)
        print(t.to_string())


if __name__ == '__main__': main()
