"""Issue 41, step 3: both judge profiles on the same results of RAGChecker's example (its 2), against the local model.

    python bench/judge_speed.py --record     # start `ragnb local serve` (one thread), send what is missing, ~25 min
    python bench/judge_speed.py              # replay the committed recording: the table, no model needed

The 3 results keep the example's claims (so both profiles judge the same claims) and lose its labels. Configurations:
`default` (all claims of a reference in one call, 3-way), `small` (`small@1`: one Yes/No call per claim, the
instruction after the claim), `small-8` (8 claims of a reference per call, `--claims-per-call 8`) and `small@2` (one
claim per call, the claim last: `judge_claim_last`). Every reply goes into the call cache
`bench/recordings/judge_speed.sqlite`, committed with this script; a rerun reads it (replay: no call is sent) and
prints the same table. With `--record`, the server's log gives the prompt tokens it evaluated per call (llama.cpp's
"prompt eval time = ... / N tokens"), i.e. those not read from its cache of the previous prompt's start, written to
`bench/recordings/judge_speed_server.json` beside the calls.

Per result and configuration: calls, prompt tokens sent, prompt tokens the server evaluated, completion tokens, wall
seconds (as recorded), and agreement with the example's labels (entailed or not: Entailment vs the rest).
"""
import argparse, copy, json, os, re, sys, time
from pathlib import Path

from ragnb.check.checker import run_checks
from ragnb.check.metrics import load_results
from ragnb.core.llm import LLM, Pacing, Deadlines, Endpoint
from ragnb.core.samples import sample_path

HERE = Path(__file__).resolve().parent
REC = HERE/'recordings'/'judge_speed.sqlite'
SERVER = HERE/'recordings'/'judge_speed_server.json'
FIELDS = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')
CONFIGS = {'default': ('default', 1), 'small': ('small@1', 1), 'small-8': ('small@1', 8),  # as recorded first
           'small@2': ('small@2', 1)}   # the claim last (judge_claim_last), issue 41's second version
MODEL = 'qwen2.5-coder-1.5b-instruct-q4_k_m'

def results(n:int=3) -> list:
    "The first `n` results of RAGChecker's example output: claims kept, labels and metrics removed."
    rs = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))[:n]
    out = []
    for r in rs:
        r = copy.deepcopy(r); r.metrics = {}
        for f in FIELDS: setattr(r, f, None)
        out.append(r)
    return out

def flat(r) -> list: return [l for f in FIELDS for v in getattr(r, f) or [] for l in (v if isinstance(v, list) else [v])]

def agreement(got, ref) -> tuple[int, int]:
    "(agreeing, compared): entailed-or-not labels of `got` against `ref`, field by field."
    a, b = flat(got), flat(ref)
    if len(a) != len(b): return 0, 0
    return sum((x == 'Entailment') == (y == 'Entailment') for x, y in zip(a, b) if x is not None), len(b)

def eval_tokens(log:str) -> list[int]:
    "Prompt tokens llama.cpp evaluated, per call, from its log ('prompt eval time = X ms / N tokens')."
    return [int(m[1]) for m in re.finditer(r'prompt eval time\s*=\s*[\d.]+ ms /\s*(\d+) tokens', log)]

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--record', action='store_true', help='start the local model and send the calls not yet recorded')
    ap.add_argument('--n', type=int, default=3, help='results of the example (default 3)')
    ap.add_argument('--configs', default=','.join(CONFIGS))
    ap.add_argument('--recording', default='judge_speed', help="the recording's name in bench/recordings (default "
                    "judge_speed; e.g. judge_speed_2026-12-05: all configurations again, on one day's machine)")
    a = ap.parse_args()
    global REC, SERVER
    REC, SERVER = HERE/'recordings'/f'{a.recording}.sqlite', HERE/'recordings'/f'{a.recording}_server.json'
    ref = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))[:a.n]
    server, srv, url, log_seen = json.loads(SERVER.read_text()) if SERVER.exists() else {}, None, None, 0
    if a.record:
        from ragnb.app.local import LocalServer
        os.environ.setdefault('RAGNB_LOCAL_THREADS', '1')
        srv = LocalServer(threads=int(os.environ['RAGNB_LOCAL_THREADS'])).start(); url = srv.base_url
        print(f"recording from {srv.model} at {url}", flush=True)
    # cache keys name the endpoint: a replay asks (without sending) the URL each configuration was recorded from
    # (the local server takes a free port each time; `_endpoint` is where a recording of one sitting was made)
    ends = server.setdefault('_endpoints', {})
    REC.parent.mkdir(exist_ok=True)
    rows, pairs = [], {}
    try:
        for cfg in a.configs.split(','):
            profile, per = CONFIGS[cfg]
            if a.record: ends.setdefault(cfg, url)
            at = ends.get(cfg) or server.get('_endpoint') or 'http://127.0.0.1:9/v1'
            for r0, rr in zip(results(a.n), ref):
                llm = LLM(base_url=url or at, endpoint=Endpoint(cache_endpoint=at), api_key=srv.api_key if srv else 'replay', model=MODEL, cache_path=REC,
                          replay=not a.record, progress=False, pacing=Pacing(concurrency=1),
                          deadlines=Deadlines(total=1800, first_token=600, idle=120))
                t0 = time.perf_counter()
                run = run_checks([r0], llm, judge_profile=profile, claims_per_call=per)
                secs = time.perf_counter() - t0
                key, u = f"{cfg}/{rr.query_id}", llm.usage
                if srv is not None and u.calls:   # what this result cost, live: kept for the replay to print
                    text = srv.log_path.read_text(errors='replace')
                    ev = eval_tokens(text[log_seen:]); log_seen = len(text)
                    server[key] = dict(calls=u.calls, prompt_tokens=u.prompt_tokens, evaluated=sum(ev),
                                       completion_tokens=u.completion_tokens, seconds=round(secs, 1))
                    SERVER.write_text(json.dumps(server, indent=1))
                r = run.results[0]; ok, n = agreement(r, rr)
                pairs.setdefault(cfg, []).extend(zip(flat(r), flat(rr)) if len(flat(r)) == len(flat(rr)) else [])
                rows.append(dict(config=cfg, result=rr.query_id, failures=len(r.ragnb.get('failures', [])),
                                 agree=ok, labels=n, **server.get(key, {})))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        if srv is not None: srv.stop()
    import pandas as pd
    t = pd.DataFrame(rows)
    for c in ('calls', 'prompt_tokens', 'evaluated', 'completion_tokens', 'seconds'):
        if c not in t: t[c] = float('nan')
    g = t.groupby('config', sort=False).agg(calls=('calls', 'mean'), prompt_tokens=('prompt_tokens', 'mean'),
                                            evaluated=('evaluated', 'mean'), completion=('completion_tokens', 'mean'),
                                            seconds=('seconds', 'mean'), agree=('agree', 'sum'), labels=('labels', 'sum'),
                                            failures=('failures', 'sum'))
    g['entailed-or-not %'] = (100 * g.agree / g.labels).round(1)
    from ragnb.check.audit import cohen_kappa
    ent = lambda xs: ['E' if x == 'Entailment' else 'n' for x in xs]
    g['kappa'] = [round(cohen_kappa(ent([a for a, _ in pairs[c]]), ent([b for _, b in pairs[c]])), 2)
                  if pairs.get(c) else float('nan') for c in g.index]
    print(f'\nper result (mean of {len(ref)} results; RAGChecker\'s example holds {len(ref)}):'); print(g.round({c: 1 for c in g.columns if c != 'kappa'}).to_string())

if __name__ == '__main__': main()
