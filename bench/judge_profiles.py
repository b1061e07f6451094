"""What gets the most out of a small judge: configurations measured against RAGChecker's example labels.

    python bench/judge_profiles.py --base-url http://127.0.0.1:8092/v1 --split tune --n 40 --configs binary,example,3way
    python bench/judge_profiles.py --base-url ... --split report --n 100 --configs default,<winner>
    python bench/judge_profiles.py --table          # the table from what was measured so far

The labelled pairs are the 217 (claim, reference, label) checks of RAGChecker's example output
(`nbs/data/ragchecker/examples/checking_outputs.json`), split in two halves by a hash of the pair's position
(`tune`: even, `report`: odd). Configurations are chosen on `tune` and reported on `report`, never the other way.
Every reply is appended to a JSONL file as it arrives (`--log`), so a run resumes where it stopped.

Configurations (one claim per call unless said otherwise):
- `default`: ragnb's `check_claims` prompt, all claims of a reference in one call, 3-way labels (replayed from the
  41_checker lesson's recording of the same model; tokens per label estimated, the replay reports none)
- `3way`: one claim per call, a one-word 3-way label
- `binary`: one claim per call, Yes/No (entailed or not); No -> Neutral
- `binary_lp`: the same call, the label read from the first token's probabilities (P(Yes) > threshold)
- `example`: `binary` with a worked example in the prompt (and `example_lp` from its probabilities)
- `binary_sent`, `example_sent`: the same with a triplet claim written as a sentence (`s p o.`)
- `vote3`: `example` sampled 3 times at temperature 0.7, majority vote

Measured with Qwen2.5-Coder-1.5B-Instruct Q4_K_M (llama-cpp-python, one thread, 2 December 2026; the table is computed
again in nbs/41_checker.ipynb, "Judge profiles, measured"): on 60 report checks `binary` agrees with RAGChecker on
95.0% entailed-or-not (kappa 0.87) and 91.7% 3-way, the default profile on the same checks 70.0% (kappa 0.02);
`binary_lp` (threshold 0.416, tuned on tune) 90.0% (kappa 0.77), so the `small` profile reads the word. Measured
later on the same 60 report checks (less loaded machine): `binary_sent` 91.7% entailed-or-not (kappa 0.78), 88.3% 3-way
(kappa 0.72), 1 call, 158 prompt + 1.3 completion tokens per label, 4.4 s a call; `vote3` (a seed per check and
sample) 66.7% (kappa 0.30), 66.7% 3-way (kappa 0.33), 3 calls, 861 + 3.0 tokens per label; each sample alone
62-63%, the three agree on 17 of 60. Neither beats `binary`. (A first `vote3` run sent seed s for sample s at every
check, so each sample was one fixed draw everywhere; its records were replaced.) `example_sent` was not measured.
The `small` profile over all 217 checks (`ragnb audit`, 41_checker/53_audit):
82.5% 3-way, 86.2% entailed-or-not, kappa 0.59 (3-way) 0.65 (binary), metrics 7.5 points from the reference on
average (default profile: 9.2%, 73.3%, -0.02, 0.15, 48.9 points); 108.5 calls, 18,604 prompt + 199 completion tokens
per result (default: 5.5 calls, 3,078 + 1,583 tokens); 6-10 s a call on one loaded CPU thread.
"""
import argparse, hashlib, json, math, sys, time, urllib.request
from collections import Counter
from pathlib import Path

from ragnb.core.llm import Replies, Retries
from ragnb.core.samples import sample_path
from ragnb.check.checker import claim_text
from ragnb.core.prompts import get_prompt

FIELDS = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')


def pairs():
    "Every labelled check of RAGChecker's example output: dict(key, split, qid, field, claim, reference, label)."
    o = json.loads(sample_path('ragchecker', 'examples', 'checking_outputs.json').read_text())
    out = []
    for r in o['results']:
        q = r['query_id']
        for f in FIELDS:
            claims = r['response_claims'] if f in ('answer2response', 'retrieved2response') else r['gt_answer_claims']
            for i, c in enumerate(claims):
                if f in ('answer2response', 'response2answer'):
                    refs = [(None, r['gt_answer'] if f == 'answer2response' else r['response'], r[f][i])]
                else: refs = [(j, ch['text'], r[f][i][j]) for j, ch in enumerate(r['retrieved_context'])]
                for j, ref, lab in refs:
                    key = f"{q}/{f}/{i}/{j}"
                    h = int(hashlib.sha1(key.encode()).hexdigest(), 16)
                    out.append(dict(key=key, split='tune' if h % 2 == 0 else 'report', qid=q, field=f, chunk=j,
                                    claim=claim_text(c), reference=ref, question=r['query'], label=lab, h=h))
    return out


def as_sentence(c):
    "A triplet's text `(s, p, o)` as the sentence `s p o.` (what `ragnb.check.checker.claim_sentence` does)."
    if c.startswith('(') and c.endswith(')'): return ' '.join(x.strip() for x in c[1:-1].split(', ')).rstrip('.') + '.'
    return c


def post(base, body, timeout=900):
    req = urllib.request.Request(base.rstrip('/') + '/chat/completions', json.dumps(body).encode(),
                                 {'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=timeout) as r: return json.loads(r.read())


def p_yes(choice):
    "P(Yes) among the first token's top alternatives (Yes/No in any case and spacing), or None."
    try: top = choice['logprobs']['content'][0]['top_logprobs']
    except (KeyError, IndexError, TypeError): return None
    y = sum(math.exp(t['logprob']) for t in top if t['token'].strip().lower() == 'yes')
    n = sum(math.exp(t['logprob']) for t in top if t['token'].strip().lower() == 'no')
    return y / (y + n) if y + n else None


def word_label(text, three):
    t = (text or '').strip().lower()
    if three:
        for l in ('Entailment', 'Neutral', 'Contradiction'):
            if t.startswith(l.lower()[:5]): return l
        return None
    return 'Entailment' if t.startswith('yes') else 'Neutral' if t.startswith('no') else None


def draw_seed(key, s):
    "A sampling seed per (check, sample): with seed s at every check, sample s was one fixed draw everywhere."
    return int(hashlib.sha256(f'{key}/{s}'.encode()).hexdigest()[:8], 16)


def run_single(base, p, cfg, log, done, three=False, samples=1, temperature=0.0):
    pr = get_prompt({'3way': 'judge_claim_3way', 'binary': 'judge_claim_binary', 'binary_sent': 'judge_claim_binary',
                     'example': 'judge_claim_binary_example', 'example_sent': 'judge_claim_binary_example',
                     'vote3': 'judge_claim_binary_example'}[cfg])
    claim = as_sentence(p['claim']) if cfg.endswith('_sent') else p['claim']
    for s in range(samples):
        k = (cfg, p['key'], s)
        if k in done: continue
        body = dict(model='qwen', messages=pr.messages(question=p['question'], reference=p['reference'],
                                                        claim=claim),
                    max_tokens=4, temperature=temperature, seed=draw_seed(p['key'], s),
                    logprobs=not three and samples == 1,
                    top_logprobs=5 if not three and samples == 1 else None)
        t0 = time.time()
        try: r = post(base, {k_: v for k_, v in body.items() if v is not None})
        except Exception as e:
            rec = dict(cfg=cfg, key=p['key'], sample=s, error=f"{type(e).__name__}: {e}"); print(rec, file=sys.stderr)
        else:
            ch = r['choices'][0]
            rec = dict(cfg=cfg, key=p['key'], sample=s, text=ch['message']['content'], p_yes=p_yes(ch),
                       pt=r['usage']['prompt_tokens'], ct=r['usage']['completion_tokens'], calls=1,
                       seconds=round(time.time() - t0, 1))
        log.write(json.dumps(rec) + '\n'); log.flush(); done.add(k)


def default_from_lesson(log, done):
    "The `default` profile's labels for every pair, replayed from the 41_checker lesson's recording of the 1.5B model."
    from ragnb.testing.scripted import lesson_llm
    from ragnb.check.audit import audit
    cache = Path(__file__).resolve().parents[1]/'nbs'/'cache'
    llm = lesson_llm('41_checker', cache_dir=cache, model='qwen2.5-coder-1.5b-instruct-q4_k_m', replies=Replies(max_tokens=1024),
                     retries=Retries(retry_truncated=0))
    a = audit(sample_path('ragchecker', 'examples', 'checking_outputs.json'), llm, 'default', quiet=True)
    n, est = len(a.pairs), a.estimated   # replayed calls report no tokens: the estimate (4 characters a token)
    for x in a.pairs.itertuples():
        key = f"{x.query_id}/{x.field}/{x.claim}/{None if x.chunk < 0 else x.chunk}"
        if ('default', key, 0) in done: continue
        log.write(json.dumps(dict(cfg='default', key=key, sample=0, label=x.judge, calls=est['calls'] / n,
                                  pt=est['prompt_tokens'] / n, ct=est['completion_tokens'] / n)) + '\n')


def kappa(a, b):
    n = len(a)
    if not n: return float('nan')
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / n / n
    return (po - pe) / (1 - pe) if pe < 1 else float('nan')


def labels_of(recs, cfg, threshold):
    "key -> judge label for a configuration (derived ones read from their base configuration's records)."
    base = {'binary_lp': 'binary', 'example_lp': 'example', 'binary_sent_lp': 'binary_sent',
            'example_sent_lp': 'example_sent'}.get(cfg, cfg)
    by = {}
    for r in recs:
        # a lost connection (the server was killed) is no reply of the model: a later run asks again
        if r['cfg'] == base and not str(r.get('error') or '').startswith(('URLError', 'RemoteDisconnected')):
            by.setdefault(r['key'], []).append(r)
    out = {}
    for k, rs in by.items():
        if cfg == 'default': out[k] = rs[0].get('label'); continue
        if cfg.endswith('_lp'):
            py = rs[0].get('p_yes')
            out[k] = None if py is None else 'Entailment' if py > threshold else 'Neutral'; continue
        ls = [word_label(r.get('text'), cfg == '3way') for r in rs]
        ls = [l for l in ls if l]
        out[k] = Counter(ls).most_common(1)[0][0] if ls else None
    return out, by


def tuned_threshold(recs, ps, cfg):
    "The P(Yes) threshold with the best binary kappa on the `tune` split (the `report` split is never looked at)."
    ref = {p['key']: p for p in ps}
    base = cfg[:-3]
    got = [(r['p_yes'], ref[r['key']]['label'] == 'Entailment') for r in recs
           if r['cfg'] == base and r.get('p_yes') is not None and ref[r['key']]['split'] == 'tune']
    if not got: return 0.5
    best = max(sorted({round(p, 3) for p, _ in got}),
               key=lambda t: (kappa([y for _, y in got], [p > t - 1e-9 for p, _ in got]), -abs(t - .5)))
    return best - 1e-9


def table(recs, ps, threshold):
    ref = {p['key']: p for p in ps}
    rows = []
    default, _ = labels_of(recs, 'default', threshold)
    for cfg in ('default', '3way', 'binary', 'binary_lp', 'binary_sent', 'binary_sent_lp', 'example', 'example_lp',
                'example_sent', 'example_sent_lp', 'vote3'):
        t = tuned_threshold(recs, ps, cfg) if cfg.endswith('_lp') and threshold is None else threshold or .5
        if cfg.endswith('_lp'): print(f"{cfg}: P(Yes) threshold {t:.3f} (chosen on tune)")
        labs, by = labels_of(recs, cfg, t)
        for split in ('tune', 'report'):
            ks = [k for k in labs if ref[k]['split'] == split]
            if not ks: continue
            # an unreadable reply counts as wrong (Neutral is the commonest label: scored as given, None != label)
            a = [ref[k]['label'] for k in ks]; b = [labs[k] or 'none' for k in ks]
            a2 = [x == 'Entailment' for x in a]; b2 = [x == 'Entailment' for x in b]
            calls = sum(r.get('calls', 1) for k in ks for r in by[k]) / len(ks)
            pt = sum(r.get('pt', 0) for k in ks for r in by[k]) / len(ks)
            ct = sum(r.get('ct', 0) for k in ks for r in by[k]) / len(ks)
            d2 = [default.get(k) == 'Entailment' for k in ks]
            rows.append((cfg, split, len(ks), sum(x == y for x, y in zip(a, b)) / len(ks),
                         sum(x == y for x, y in zip(a2, b2)) / len(ks), kappa(a, b), kappa(a2, b2), calls, pt, ct,
                         sum(labs[k] is None for k in ks), sum(x == y for x, y in zip(a2, d2)) / len(ks),
                         kappa(a2, d2)))
    print(f"{'configuration':12} {'split':7} {'n':>4} {'3-way':>6} {'binary':>6} {'kappa3':>6} {'kappa2':>6} "
          f"{'calls':>6} {'prompt':>7} {'compl':>6} {'unread':>6} {'default binary/kappa2 same pairs':>34}")
    for r in rows:
        print(f"{r[0]:12} {r[1]:7} {r[2]:4d} {r[3]:6.1%} {r[4]:6.1%} {r[5]:6.2f} {r[6]:6.2f} {r[7]:6.2f} "
              f"{r[8]:7.0f} {r[9]:6.1f} {r[10]:6d} {r[11]:18.1%} {r[12]:6.2f}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--base-url', default='http://127.0.0.1:8092/v1')
    ap.add_argument('--split', choices=['tune', 'report'], default='tune')
    ap.add_argument('--n', type=int, default=40, help='pairs of the split (in hash order: a fixed sample)')
    ap.add_argument('--configs', default='binary,example,3way')
    ap.add_argument('--log', default='bench/judge_profiles.jsonl')
    ap.add_argument('--threshold', type=float, default=None,
                    help="P(Yes) above which a *_lp label is Entailment (default: the best on the tune split)")
    ap.add_argument('--table', action='store_true', help='only print the table of what was measured')
    a = ap.parse_args()
    ps = pairs()
    log_path = Path(a.log)
    recs = [json.loads(l) for l in log_path.read_text().splitlines()] if log_path.exists() else []
    if not a.table:
        chosen = sorted((p for p in ps if p['split'] == a.split), key=lambda p: p['h'])[:a.n]
        # claims of one reference one after another: the server's prompt cache then reuses the reference's tokens
        chosen.sort(key=lambda p: (p['qid'], p['reference'], p['key']))
        done = {(r['cfg'], r['key'], r.get('sample', 0)) for r in recs if 'error' not in r or r.get('label')}
        with log_path.open('a') as log:
            for cfg in a.configs.split(','):
                print(f"{cfg}: {len(chosen)} pairs of {a.split}", file=sys.stderr)
                if cfg == 'default': default_from_lesson(log, done); continue
                for p in chosen:
                    run_single(a.base_url, p, cfg, log, done, three=cfg == '3way',
                               samples=3 if cfg == 'vote3' else 1, temperature=0.7 if cfg == 'vote3' else 0.0)
        recs = [json.loads(l) for l in log_path.read_text().splitlines()]
    print(f"labelled pairs: {len(ps)} ({sum(p['split'] == 'tune' for p in ps)} tune, "
          f"{sum(p['split'] == 'report' for p in ps)} report); calls and tokens per checked label")
    table(recs, ps, a.threshold)


if __name__ == '__main__': main()
