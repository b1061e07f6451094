"""What a model can do on ragnb's four structured tasks, with and without constrained output, on hand-written cases.

    RAGNB_LIVE_BASE_URL=http://127.0.0.1:8088/v1 RAGNB_LIVE_MODEL=qwen python bench/live_smallmodel.py [--out results.json]

Cases and gold answers: bench/smallmodel_cases.json. Prints one markdown table (per task and mode) and writes every
reply to --out for reading by hand. Modes: `prompt` (no response_format) and `schema` (JSON schema where the endpoint
takes one, learnt by ragnb.core.llm; questions and ratings then come as JSON too).
"""
import argparse, json, os, sys, tempfile, time
from pathlib import Path
import numpy as np
from ragnb.core.llm import LLM, Deadlines, Pacing, Replies
from ragnb.core.calls import Request
from ragnb.core.prompts import get_prompt
from ragnb.check.checker import salvage_claims, claims_schema, claim_text, llm_checker, CheckTask, _words
from ragnb.synth.generate import generate_questions, critique, parse_rating, QA, RATING_SCHEMA, critique_request
from ragnb.docs.documents import Document, split_document

HERE = Path(__file__).parent
from ragnb.core.samples import sample_path
SHARED = sample_path()  # the repository's nbs/data

def covered(fact:str, claims:list) -> bool:
    "A gold fact counts as extracted when most of its content words are in one claim."
    f = _words(fact)
    return any(len(f & _words(claim_text(c))) >= 0.6 * len(f) for c in claims) if f else False

def grounded(claim, text:str) -> bool:
    "A claim is taken from the text when most of its content words are in it (a proxy; replies are also read by hand)."
    w = _words(claim_text(claim))
    return bool(w) and len(w & _words(text)) >= 0.7 * len(w)

def run_claims(llm, cases, schema):
    p = get_prompt('extract_claims_triplet')
    reqs = [Request(p.messages(question=c['question'], text=c['text']), p, c['id'], parse=salvage_claims,
                    schema=claims_schema('triplet') if schema else None) for c in cases]
    rows = []
    for c, r in zip(cases, llm.batch(reqs, desc='claims', show_estimate=0)):
        got = list(r.value) if r.ok else []
        rows.append(dict(id=c['id'], ok=r.ok, failure=None if r.ok else r.failure.kind, elements=r.value.total if r.ok else 0,
                         dropped=len(r.value.dropped) if r.ok else 0, claims=got, text=r.text,
                         coverage=(np.mean([covered(f, got) for f in c['facts']]) if c['facts'] else float(not got)),
                         from_text=np.mean([grounded(x, c['text']) for x in got]) if got else None))
    return rows

def run_labels(llm, cases):
    tasks = [CheckTask(c['id'], c['question'], c['reference'], [x for x, _ in c['claims']]) for c in cases]
    out = llm_checker(llm, rounds=1)(tasks)
    rows = []
    for c, o in zip(cases, out):
        gold = [g for _, g in c['claims']]
        got = o.labels or [None] * len(gold)
        rows.append(dict(id=c['id'], gold=gold, got=got, failure=o.failure, right=sum(a == b for a, b in zip(gold, got))))
    return rows

def run_questions(llm, cases, schema):
    docs = []
    for c in cases:
        if 'doc' in c:
            t = (SHARED/c['doc']).read_text()
            docs.append(Document(t, str(SHARED/c['doc']), c['doc'], c['id'], '.md'))
        else: docs.append(Document(c['text'], 'mem', f"{c['id']}.md", c['id'], '.md'))
    chunks = [split_document(d, 3000, 0)[0] for d in docs]
    qs = generate_questions(chunks, llm, docs, structured=schema)
    return [dict(id=q.chunk_id, ok=bool(q.question), question=q.question, answer=q.answer, evidence=q.evidence,
                 evidence_match=q.evidence_match, failure=q.failures[0]['kind'] if q.failures else None) for q in qs]

def run_critiques(llm, cases, contexts, schema):
    reqs = []
    for i, c in enumerate(cases):
        q = QA(f"c{i}", 'd', 'd.md', 'c', 0, contexts.get(c.get('context_of'), ''), question=c['question'])
        reqs.append(critique_request(q, c['criterion'], 'developers', schema))
    rows = []
    for c, r in zip(cases, llm.batch(reqs, desc='critiques', show_estimate=0)):
        rows.append(dict(criterion=c['criterion'], question=c['question'], gold=c['gold'], score=r.value.score if r.ok else None,
                         failure=None if r.ok else r.failure.kind, text=r.text))
    return rows

def summary(res) -> dict:
    "The figures of one mode, for the tasks that were run."
    cl, lb, qs, cr = res['claims'], res['labels'], res['questions'], res['critiques']
    out = {}
    if cl:
        cov = [r['coverage'] for r in cl if r['id'] != 'abstain']; ft = [r['from_text'] for r in cl if r['from_text'] is not None]
        out.update({'claims: replies read': f"{sum(r['ok'] for r in cl)}/{len(cl)}",
                    'claims: malformed elements dropped': sum(r['dropped'] for r in cl),
                    'claims: texts with zero claims': f"{sum(not r['claims'] for r in cl)} (should be {sum(r['id'] == 'abstain' for r in cl)})",
                    'claims: gold facts covered': f"{np.mean(cov):.0%}" if cov else '-',
                    'claims: claims taken from the text': f"{np.mean(ft):.0%}" if ft else '-'})
    if lb:
        out['labels: right'] = f"{sum(r['right'] for r in lb)}/{sum(len(r['gold']) for r in lb)}"
        for k in ('Entailment', 'Neutral', 'Contradiction'):
            out[f'labels: {k} right'] = f"{sum(a == b == k for r in lb for a, b in zip(r['gold'], r['got']))}/{sum(a == k for r in lb for a in r['gold'])}"
        out['labels: unlabelled'] = sum(g is None for r in lb for g in r['got'])
    if qs:
        out['questions: parsed'] = f"{sum(r['ok'] for r in qs)}/{len(qs)}"
        out['questions: evidence found (exact/normalised/fuzzy)'] = (f"{sum(r['evidence_match'] is not None for r in qs)}/{len(qs)} ("
            + '/'.join(str(sum(r['evidence_match'] == m for r in qs)) for m in ('exact', 'normalised', 'fuzzy')) + ')')
    for crit, yes in (('groundedness', 'answerable'), ('standalone', 'standalone')):
        rows = [r for r in cr if r['criterion'] == crit]
        if not rows: continue
        sc = lambda pos: [r['score'] for r in rows if (r['gold'] == yes) == pos]
        out[f"{crit}: scores, {yes} vs not"] = f"{sc(True)} vs {sc(False)}"
        out[f'{crit}: right at >= 3'] = f"{sum(((r['score'] or 0) >= 3) == (r['gold'] == yes) for r in rows)}/{len(rows)}"
    if cr: out['critiques: parse failures'] = sum(r['failure'] == 'parse' for r in cr)
    return out

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=None, help='JSON file for every reply')
    ap.add_argument('--modes', default='prompt,schema')
    ap.add_argument('--limit', type=int, default=None, help='first N cases of each task (they alternate positive and negative)')
    ap.add_argument('--tasks', default='claims,labels,questions,critiques')
    a = ap.parse_args(argv)
    cases = json.loads((HERE/'smallmodel_cases.json').read_text())
    contexts = {c['id']: c['text'] for c in cases['questions'] if 'text' in c}   # before --limit: critiques need them
    tasks = a.tasks.split(',')
    for k in ('claims', 'labels', 'questions', 'critiques'):
        cases[k] = cases[k][:a.limit] if k in tasks else []
    cache = Path(os.environ.get('RAGNB_LIVE_CACHE_DIR') or tempfile.mkdtemp())
    out = {}
    for mode in a.modes.split(','):
        llm = LLM(base_url=os.environ['RAGNB_LIVE_BASE_URL'], api_key=os.environ.get('RAGNB_LIVE_API_KEY') or 'none',
                  model=os.environ.get('RAGNB_LIVE_MODEL') or 'gpt-4o-mini', cache_path=cache/'calls.sqlite', deadlines=Deadlines(total=float(os.environ.get('RAGNB_TIMEOUT') or 1800)),
                  pacing=Pacing(concurrency=1), progress=False, replies=Replies(structured='auto' if mode == 'schema' else 'off'))
        t0 = time.perf_counter()
        schema = mode == 'schema'
        res = dict(claims=run_claims(llm, cases['claims'], schema) if cases['claims'] else [],
                   labels=run_labels(llm, cases['labels']) if cases['labels'] else [],
                   questions=run_questions(llm, cases['questions'], schema) if cases['questions'] else [],
                   critiques=run_critiques(llm, cases['critiques'], contexts, schema) if cases['critiques'] else [])
        secs = time.perf_counter() - t0
        u = llm.usage
        res['usage'] = dict(calls=u.calls, cached=u.cached, failed=u.failed, prompt_tokens=u.prompt_tokens,
                            completion_tokens=u.completion_tokens, seconds=round(secs, 1),
                            completion_tokens_per_s=round(u.completion_tokens / secs, 2) if u.calls else None,
                            structured=[(f['feature'], f['status']) for f in llm.features()])
        res['summary'] = summary(res)
        out[mode] = res
        print(f"## {mode}: {json.dumps(res['usage'])}", flush=True)
    keys = list(next(iter(out.values()))['summary'])
    print('\n| measure | ' + ' | '.join(out) + ' |\n|---|' + '---|' * len(out))
    for k in keys: print(f"| {k} | " + ' | '.join(str(out[m]['summary'][k]) for m in out) + ' |')
    if a.out: Path(a.out).write_text(json.dumps(out, indent=2, default=str))

if __name__ == '__main__': sys.exit(main())
