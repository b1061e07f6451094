"""Speed and quality per task of the model behind a demo recording (by default the shipped one: the local model).

Speed comes from the recording: calls, prompt and completion tokens per task, and each call's time, taken as the gap
between its cache timestamp and the one before (the local model answers one call at a time, so the gaps are the call
times; the first call of each run has no gap and is left out). Quality comes from a demo run's folder: pass --out of a
`ragnb demo` run on that recording (replayed or the recording run itself), or the bench replays it into a temporary
folder first.

With --live N it also times N fresh question-generation calls (no cache) on the local model now, one at a time, so the
speed can be read apart from whatever else the machine was doing when the recording was made.

Usage: python bench/local_model.py [--recording ragnb/data/demo_calls.jsonl] [--out demo-out] [--live 3]
"""
import argparse, json, statistics, tempfile
from collections import Counter, defaultdict
from pathlib import Path
from ragnb.app.demo import read_recording, recording_path, run_demo, sample_docs

ap = argparse.ArgumentParser()
ap.add_argument('--recording', default=None)
ap.add_argument('--out', default=None, help='a demo run of this recording (default: replay it into a temporary folder)')
ap.add_argument('--live', type=int, default=0, help='also time this many fresh calls on the local model now')
a = ap.parse_args()

if a.live:
    import os, time
    from ragnb.docs.documents import load_documents, split_documents
    from ragnb.app.local import LocalServer, local_llm
    from ragnb.core.prompts import get_prompt
    chunks = split_documents(load_documents(sample_docs()), 3000, 300)[:a.live]
    with LocalServer() as srv:
        llm = local_llm(srv, cache=False, progress=False)
        print(f"live: {srv.model}, {os.environ.get('RAGNB_LOCAL_THREADS') or os.cpu_count()} thread(s), load average {os.getloadavg()[0]:.1f}")
        for c in chunks:
            t0 = time.perf_counter()
            r = llm.call(get_prompt('factoid_qa').messages(context=c.text, language='English'))
            dt = time.perf_counter() - t0
            print(f"  {c.id}: {dt:.1f} s, {r.usage.prompt_tokens} prompt + {r.usage.completion_tokens} completion tokens, "
                  f"{(r.usage.prompt_tokens + r.usage.completion_tokens)/dt:.1f} tok/s")

meta, rows = read_recording(a.recording or recording_path())
TASK = {'factoid_qa': 'question generation', 'factoid_qa_next': 'question generation', 'critique_groundedness': 'critique',
        'critique_relevance': 'critique', 'critique_standalone': 'critique', 'rag_answer': 'RAG answer',
        'extract_claims_triplet': 'claim extraction', 'extract_claims_sentence': 'claim extraction',
        'check_claims': 'claim checking', 'repair_json': 'repair turn'}
print(f"model {meta['model']} ({meta['mode']}), recorded {meta['recorded']} with ragnb {meta['ragnb']}; settings {meta['params']}")
starts = sorted(run['started'] for run in meta.get('runs', []))  # a gap across a run's start is not a call's time
by = defaultdict(lambda: dict(calls=0, pt=0, ct=0, secs=[]))
prev = None
for r in rows:
    t = by[TASK.get((r['prompt'] or '').split('@')[0], r['prompt'] or 'other')]
    u = r['record'].get('usage') or {}
    t['calls'] += 1; t['pt'] += u.get('prompt_tokens', 0); t['ct'] += u.get('completion_tokens', 0)
    if prev is not None and not any(prev < s0 < r['created'] for s0 in starts): t['secs'].append(r['created'] - prev)
    prev = r['created']
print(f"\n{'task':<20}{'calls':>6}{'s/call':>8}{'calls/s':>9}{'prompt tok':>11}{'compl tok':>10}{'tok/s (prompt+compl)':>22}{'compl tok/s':>12}")
tot = dict(calls=0, pt=0, ct=0, secs=0.0, timed=0)
for name, t in by.items():
    s = sum(t['secs']); n = len(t['secs'])
    share = n / t['calls'] if t['calls'] else 0  # the timed share of calls, to scale tokens to the timed calls
    rate = lambda x: f"{x*share/s:.1f}" if s else '-'
    print(f"{name:<20}{t['calls']:>6}{(s/n if n else float('nan')):>8.1f}{(n/s if s else float('nan')):>9.3f}{t['pt']:>11,}{t['ct']:>10,}"
          f"{rate(t['pt']+t['ct']):>22}{rate(t['ct']):>12}")
    tot['calls'] += t['calls']; tot['pt'] += t['pt']; tot['ct'] += t['ct']; tot['secs'] += s; tot['timed'] += n
print(f"{'all':<20}{tot['calls']:>6}{tot['secs']/tot['timed']:>8.1f}{tot['timed']/tot['secs']:>9.3f}{tot['pt']:>11,}{tot['ct']:>10,}"
      f"{(tot['pt']+tot['ct'])*tot['timed']/tot['calls']/tot['secs']:>22.1f}{tot['ct']*tot['timed']/tot['calls']/tot['secs']:>12.1f}")
print("stage wall times of the recording run (s): " + ', '.join(f"{s['stage']} {s['seconds']}" for s in meta['stages']))

out = Path(a.out) if a.out else Path(tempfile.mkdtemp())/'demo'
if not a.out: run_demo(out, mode='replayed', log=lambda s: None)
s = json.loads((out/'summary.json').read_text())
ds = [json.loads(l) for l in (out/'dataset.jsonl').read_text().splitlines()]
res = json.loads((out/'ragchecker_output.json').read_text())['results']
print("\nquality per task (one demo run; the same model judges its own answers, so the RAGChecker numbers are its opinion)")
q = [r for r in ds if r['question']]
fails = Counter(f['stage'] for r in ds for f in r['failures'])
print(f"question generation: {len(q)}/{len(ds)} replies in the protocol; evidence found in the source {sum(bool(r['evidence_found']) for r in q)}/{len(q)}"
      f" (exact {sum(r['evidence_match'] == 'exact' for r in q)}, normalised {sum(r['evidence_match'] == 'normalised' for r in q)}, fuzzy {sum(r['evidence_match'] == 'fuzzy' for r in q)})")
crit = {c: [r[f'{c}_score'] for r in q if r[f'{c}_score'] is not None] for c in ('groundedness', 'relevance', 'standalone')}
print("critique: " + '; '.join(f"{c} {len(v)}/{len(q)} ratings read, scores {dict(sorted(Counter(v).items()))}" for c, v in crit.items())
      + f"; kept {sum(bool(r['kept']) for r in ds)}/{len(q)}; failed calls by stage {dict(fails)}")
print(f"RAG answers: {len(res)}/{s['dataset']['kept']} kept questions answered ({s['failures']['rag_answers']} failed)")
texts = [(r.get(f) or []) for r in res for f in ('response_claims', 'gt_answer_claims')]
print(f"claim extraction: {sum(bool(t) for t in texts)}/{len(texts)} texts gave claims, {sum(map(len, texts))} claims "
      f"({statistics.mean(map(len, texts)) if texts else 0:.1f} per text)")
labels = Counter(l for r in res for f in ('answer2response', 'response2answer') for l in (r.get(f) or []))
labels += Counter(l for r in res for f in ('retrieved2response', 'retrieved2answer') for row in (r.get(f) or []) for l in row)
need = sum(1 for r in res for f in ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer'))
have = sum(1 for r in res for f in ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer') if r.get(f) is not None)
print(f"claim checking: {have}/{need} label sets complete, labels {dict(labels)}; checking failures {s['failures']['checking']}")
print(f"RAGChecker overall: {s['ragchecker']['overall_metrics']}")
