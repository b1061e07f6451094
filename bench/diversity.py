"""The cost and the effect of diverse questions, on the cookbook with ragnb's scripted server.

For a sample of passages, writes a factoid-only set and a mixed set (all five types, equal weights), and prints: the
calls per question and per kept question by type (own calls plus the shared entity, embedding and persona calls), and
BM25's hit@k on each set with all-hops@k per type. Run: python bench/diversity.py [N_PASSAGES] [SEED]
"""
import sys, tempfile, time
from pathlib import Path
import pandas as pd
from ragnb.core.llm import LLM
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path
from ragnb.docs.documents import load_folder, split_documents
from ragnb.synth.diversity import mixed_dataset, cost_by_type, mix_table
from ragnb.rag.retrieval import evaluate, BM25Retriever, by_question_type

def main(n:int=100, seed:int=0):
    pd.set_option('display.width', 200)
    docs = load_folder(sample_path('openai-cookbook'))
    chunks = split_documents(docs, 1000, 200)
    with ScriptedServer() as srv, tempfile.TemporaryDirectory() as tmp:
        llm = LLM(base_url=srv.base_url, api_key='bench', model='scripted-test-model', embed_model='scripted-embedding',
                  cache_path=Path(tmp)/'c.sqlite', progress=False)
        out = {}
        for name, types in [('factoid only', 'factoid'), ('mixed', 'factoid,multi_hop,comparative,reasoning,conditional')]:
            t0 = time.perf_counter()
            ds = mixed_dataset(docs, llm, types, max_chunks=n, seed=seed)
            print(f"\n== {name}: {ds} in {time.perf_counter() - t0:.1f} s; model calls {ds.stats['calls']} "
                  f"(+{ds.stats.get('embedding_calls', 0)} embedding requests), {ds.stats['calls'] / max(1, ds.counts()['kept']):.2f} per kept question")
            print(cost_by_type(ds).to_string())
            print(mix_table(ds).to_string())
            out[name] = (ds, evaluate(ds, chunks, BM25Retriever(), ks=(1, 5, 10), name=name))
    print('\n== BM25 (chunks of 1000 characters, overlap 200)')
    print(pd.DataFrame({n: {'questions': len(r.per_question), **{f'hit@{k}': f"{r.mean('hit', k):.3f}" for k in (1, 5, 10)}}
                        for n, (_, r) in out.items()}).to_string())
    print('\nmixed set, by question type (hit: some hop in the top k; all-hops: every hop)')
    print(by_question_type(out['mixed'][1], [5, 10]).to_string())

if __name__ == '__main__': main(*(int(a) for a in sys.argv[1:3]))
