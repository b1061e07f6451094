"""Issue 41: the small judge's versions on the cases a small judge gets wrong, against the local model.

    python bench/judge_hard.py --record     # start `ragnb local serve` (one thread), send what is missing, ~10 min
    python bench/judge_hard.py              # replay the committed recording: the tables, no model needed
    python bench/judge_hard.py --cases heldout --configs small@1,small@2 [--record]   # the held-out cases
    python bench/judge_hard.py --example    # RAGChecker's example (217 labelled checks) instead of the cases

The cases are `bench/judge_hard_cases.json`: 10 passages and 71 claims written for this bench (paraphrase, other units,
conclusions from two sentences, hedges kept or dropped, claims not mentioned, contradictions, wrong conversions), with
RAGChecker's three labels. `bench/judge_heldout_cases.json` (7 passages, 49 claims, the same kinds of case) was
written after `small@2` was chosen on those and on RAGChecker's example, and first asked then. Each configuration labels every claim through ragnb's own `small_checker` (one claim per
call, the claims of a passage one after another, one call in flight):

- `small@1`: `judge_claim_binary`, the instruction after the claim (the lessons' recordings)
- `small@2`: `judge_claim_last`, the instruction first and the claim last, with rules for the hard cases
- `last+ask`: `judge_claim_last` with "Answer Yes or No." after the claim (registered here only, to see what the
  trailing words are worth against the prompt tokens they cost on every call)

Every reply goes into `bench/recordings/judge_hard.sqlite`, committed with this script; a rerun replays it. With
`--record`, llama.cpp's log gives the prompt tokens it evaluated (not read from its prompt cache), kept in
`bench/recordings/judge_hard_server.json`. Printed: per configuration, entailed-or-not agreement and Cohen's kappa
against the labels, claims left unlabelled, claims asked again, calls, prompt tokens sent and evaluated, seconds; then
agreement per case.
"""
import argparse, json, os, sys, time
from pathlib import Path

from ragnb.check.checker import CheckTask, check_tasks, small_checker, small_prompt
from ragnb.core.llm import LLM, Pacing, Deadlines, Endpoint
from ragnb.core.prompts import Prompt, get_prompt, register

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from judge_speed import eval_tokens, flat, results, MODEL   # noqa: E402  (the same model, example and log reader)

CASES = HERE/'judge_hard_cases.json'
REC = HERE/'recordings'/'judge_hard.sqlite'
SERVER = HERE/'recordings'/'judge_hard_server.json'
ENDPOINT = 'local-model'   # the name calls are filed under in the recording (the server's port changes)

_last = get_prompt('judge_claim_last')
_RULES, _INPUTS = _last.template.split('\n\nQuestion (context only)')
_INPUTS = '\n\nQuestion (context only)' + _INPUTS
_EXAMPLES = """

Examples, for the reference "The Lindau bridge, opened in 2004, is 1,500 metres long. It carries four lanes of traffic.
Engineers say it may need new cables by 2040.":
- The Lindau bridge is about 1.5 kilometres long. -> Yes (other units)
- The Lindau bridge opened in the early 2000s. -> Yes (another form)
- The bridge that opened in 2004 carries four lanes. -> Yes (two sentences together)
- Engineers say the Lindau bridge may need new cables by 2040. -> Yes (the claim keeps the "may")
- The Lindau bridge will need new cables by 2040. -> No (the reference only says it may)
- The Lindau bridge is 1,500 feet long. -> No (metres are not feet)
- The Lindau bridge has a toll. -> No (not mentioned)"""
_RULES2 = """Answer Yes if the reference supports the claim, No if it does not. Use only the reference.
- Other words, other units or another form of the same fact support it: convert the numbers and compare.
- Two or more sentences of the reference read together can support it.
- A reference that says something may, might, could, probably or is likely to be so does NOT support a claim that
  says it is so; it supports only a claim that keeps the may, might or could.
- A fact the reference does not mention is not supported, even if it is true."""
VARIANTS = {   # bench only: what the trailing question, worked examples and sharper rules are worth
    'judge_claim_last_ask': (_last.template + "\n\nAnswer Yes or No.", 'judge_claim_last, then "Answer Yes or No."'),
    'judge_claim_last_ex': (_RULES + _EXAMPLES + _INPUTS + "\n\nAnswer Yes or No.",
                            'judge_claim_last_ask with worked examples in the shared start'),
    'judge_claim_last_r2': (_RULES2 + _INPUTS + "\n\nAnswer Yes or No.", 'sharper rules, then "Answer Yes or No."'),
    'judge_claim_last_r2ex': (_RULES2 + _EXAMPLES + _INPUTS + "\n\nAnswer Yes or No.",
                              'sharper rules and worked examples, then "Answer Yes or No."'),
    'judge_claim_last_r2bare': (_RULES2 + _INPUTS, 'sharper rules, the claim last'),
    'judge_claim_last_r2exbare': (_RULES2 + _EXAMPLES + _INPUTS, 'sharper rules and worked examples, the claim last'),
}
for name, (template, what) in VARIANTS.items():
    register(Prompt(name, '1', system=_last.system, template=template, description=f'bench only: {what}'))
CONFIGS = {'small@1': small_prompt('small@1'), 'small@2': small_prompt('small@2'), 'last+ask': 'judge_claim_last_ask',
           'last+ex': 'judge_claim_last_ex', 'rules2': 'judge_claim_last_r2', 'rules2+ex': 'judge_claim_last_r2ex',
           'rules2-bare': 'judge_claim_last_r2bare', 'rules2+ex-bare': 'judge_claim_last_r2exbare'}

def tasks(path:Path=CASES) -> tuple[list, list]:
    "One `CheckTask` per passage, and the (case, label) of every claim in the same order."
    doc = json.loads(path.read_text())
    ts = [CheckTask(p['id'], p['question'], p['reference'], [c['text'] for c in p['claims']]) for p in doc['passages']]
    return ts, [(c['case'], c['label']) for p in doc['passages'] for c in p['claims']]

def example_tasks() -> tuple[list, list]:
    "RAGChecker's example as `CheckTask`s (its claims, labels removed), and its labels in the same order."
    ref = results(2)
    from ragnb.check.metrics import load_results
    from ragnb.core.samples import sample_path
    gold_rs = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))[:2]
    ts = [t for r in ref for t, _, _ in check_tasks(r)]
    return ts, [('example', l) for r in gold_rs for l in _in_task_order(r)]

def _in_task_order(r) -> list:
    "A result's labels in the order `check_tasks` asks for them: answer, response, then each chunk (response, answer)."
    out = list(r.answer2response or []) + list(r.response2answer or [])
    for i in range(len(r.retrieved_context)):
        out += [row[i] for row in r.retrieved2response] + [row[i] for row in r.retrieved2answer]   # [claim][chunk]
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--record', action='store_true', help='start the local model and send the calls not yet recorded')
    ap.add_argument('--configs', default=','.join(CONFIGS))
    ap.add_argument('--example', action='store_true', help="RAGChecker's example (217 labelled checks), not the cases")
    ap.add_argument('--cases', choices=('hard', 'heldout'), default='hard', help='which hand-written cases (default hard)')
    a = ap.parse_args()
    ts, gold = example_tasks() if a.example else tasks(HERE/f'judge_{a.cases}_cases.json')
    part = '/example' if a.example else '' if a.cases == 'hard' else '/heldout'   # where the server figures are kept
    server, srv, url, log_seen = json.loads(SERVER.read_text()) if SERVER.exists() else {}, None, None, 0
    if a.record:
        from ragnb.app.local import LocalServer
        os.environ.setdefault('RAGNB_LOCAL_THREADS', '1')
        srv = LocalServer(threads=int(os.environ['RAGNB_LOCAL_THREADS'])).start(); url = srv.base_url
        print(f"recording from {srv.model} at {url}", flush=True)
    url = url or 'http://127.0.0.1:9/v1'   # replay: nothing is sent
    REC.parent.mkdir(exist_ok=True)
    rows, per_case = [], {}
    from ragnb.check.audit import cohen_kappa
    try:
        for cfg in a.configs.split(','):
            llm = LLM(base_url=url, endpoint=Endpoint(cache_endpoint=ENDPOINT), api_key=srv.api_key if srv else 'replay', model=MODEL, cache_path=REC, replay=not a.record, progress=False,
                      pacing=Pacing(concurrency=1), deadlines=Deadlines(total=1800, first_token=600, idle=120))
            t0 = time.perf_counter()
            out = small_checker(llm, prompt=CONFIGS[cfg])(ts)
            secs = time.perf_counter() - t0
            u = llm.usage
            if srv is not None and u.calls:
                text = srv.log_path.read_text(errors='replace')
                ev = eval_tokens(text[log_seen:]); log_seen = len(text)
                server[cfg + part] = dict(calls=u.calls, prompt_tokens=u.prompt_tokens, evaluated=sum(ev),
                                   completion_tokens=u.completion_tokens, seconds=round(secs, 1))
                SERVER.write_text(json.dumps(server, indent=1))
            got = [l for o in out for l in (o.labels or [None] * len(o.replies))]
            pairs = [(g, l) for g, (_, l) in zip(got, gold) if g is not None]
            ent = lambda xs: ['E' if x == 'Entailment' else 'n' for x in xs]
            agree = sum((g == 'Entailment') == (l == 'Entailment') for g, l in pairs)
            for g, (case, l) in zip(got, gold):
                if g is not None:
                    per_case.setdefault(case, {}).setdefault(cfg, []).append((g == 'Entailment') == (l == 'Entailment'))
            rows.append(dict(config=cfg, prompt=CONFIGS[cfg], agree=agree, labelled=len(pairs), claims=len(gold),
                             pct=round(100 * agree / max(len(pairs), 1), 1),
                             kappa=round(cohen_kappa(ent([g for g, _ in pairs]), ent([l for _, l in pairs])), 2),
                             says_yes=sum(g == 'Entailment' for g, _ in pairs),
                             asked_again=sum(len(o.asked_again) for o in out),
                             **server.get(cfg + part, {})))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if srv is not None: srv.stop()
    import pandas as pd
    print(f"\n{len(gold)} claims ({sum(l == 'Entailment' for _, l in gold)} supported), entailed-or-not:")
    print(pd.DataFrame(rows).set_index('config').to_string())
    t = pd.DataFrame({case: {cfg: f"{sum(v)}/{len(v)}" for cfg, v in d.items()} for case, d in per_case.items()}).T
    print("\nright per case:"); print(t.to_string())

if __name__ == '__main__': main()
