"""Benchmark: synthetic QA (generation + three critiques) over the whole cookbook against ragnb's test server.

Prints calls, tokens, wall time and the time spent outside model calls (target: under 5% of the total).
Usage: python bench/generate.py [--latency 0.2] [--concurrency 16] [--questions-per-chunk 1]
"""
import argparse, math, tempfile, time
from pathlib import Path
from ragnb.docs.documents import load_folder, split_documents
from ragnb.synth.generate import generate_dataset
from ragnb.core.llm import LLM, Pacing
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path

COOKBOOK = sample_path('openai-cookbook')

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--latency', type=float, default=0.2, help='seconds per model reply')
    ap.add_argument('--concurrency', type=int, default=16)
    ap.add_argument('--questions-per-chunk', type=int, default=1)
    ap.add_argument('--src', default=str(COOKBOOK))
    a = ap.parse_args()
    t0 = time.perf_counter()
    docs = load_folder(a.src)
    load_s = time.perf_counter() - t0
    n_chunks = len(split_documents(docs))
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(latency=a.latency) as srv:
        llm = LLM(base_url=srv.base_url, api_key='bench', model='scripted-test-model', cache_path=Path(tmp)/'c.sqlite',
                  pacing=Pacing(concurrency=a.concurrency), progress=False)
        t1 = time.perf_counter()
        ds = generate_dataset(docs, llm, n_per_chunk=a.questions_per_chunk)
        wall = time.perf_counter() - t1
    s, c = ds.stats, ds.counts()
    model = s['model_seconds']
    outside = wall - model
    rounds = a.questions_per_chunk
    ideal = (sum(math.ceil(n_chunks / a.concurrency) for _ in range(rounds)) + math.ceil(3 * c['questions'] / a.concurrency)) * a.latency
    print(f"corpus: {len(docs)} documents, {n_chunks} chunks (loaded and split in {load_s:.2f} s)")
    print(f"server latency {a.latency*1000:.0f} ms, concurrency {a.concurrency}, {a.questions_per_chunk} question(s) per chunk")
    print(f"calls: {s['calls']} ({s['cached']} cached, {s['failed_calls']} failed)")
    print(f"tokens: {s['prompt_tokens']:,} prompt + {s['completion_tokens']:,} completion")
    print(f"questions: {c['questions']}, kept {c['kept']}, dropped {c['dropped']}, failed {c['failed']}")
    print(f"wall time: {wall:.2f} s (lower bound at this latency and concurrency: {ideal:.2f} s)")
    print(f"inside model-call batches: {model:.2f} s")
    print(f"outside model calls (load excluded; split, grounding, selection, records): {outside:.3f} s = {100*outside/wall:.2f}% of the total (target < 5%)")

if __name__ == '__main__': main()
