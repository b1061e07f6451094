"""BM25 indexing and querying speed over the OpenAI cookbook corpus, and the wall time of a chunking sweep.

    python bench/retrieval.py [--copies 10] [--queries 2000]

Queries are known-item searches built here (not by a model): a sentence picked from a random chunk, with its stop
words and every third remaining word dropped, whose evidence offsets are the sentence's place in its document. They
give the sweep real work to do and a sanity figure (hit rate), not a measure of retrieval quality.
"""
import argparse, os, random, re, statistics, time
from pathlib import Path

os.environ.setdefault('TQDM_DISABLE', '1')
import pandas as pd
from ragnb.docs.documents import Document, load_folder, split_documents
from ragnb.rag.retrieval import BM25Retriever, evaluate, sweep
from ragnb.core.samples import sample_path

COOKBOOK = sample_path('openai-cookbook')


def known_item_queries(docs, chunks, n, seed=0):
    "Rows with a query made from a sentence of a random chunk, and that sentence's offsets in its document."
    rng, text, rows = random.Random(seed), {d.id: d.text for d in docs}, []
    while len(rows) < n:
        c = rng.choice(chunks)
        sents = [m for m in re.finditer(r'[A-Z][^.!?\n]{40,200}[.!?]', c.text)]
        if not sents: continue
        m = rng.choice(sents)
        words = [w for w in re.findall(r'\w+', m.group()) if len(w) > 3]
        q = ' '.join(w for i, w in enumerate(words) if i % 3 != 2)
        s = c.start_index + m.start()
        assert text[c.doc_id][s:s + len(m.group())] == m.group()
        rows.append(dict(query_id=f'k{len(rows)}', source_doc=c.doc_id, question=q, evidence=m.group(),
                         evidence_start=s, evidence_end=s + len(m.group()), evidence_found=True))
    return pd.DataFrame(rows)


def best_of(f, repeat=3):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--copies', type=int, default=10, help='also time a corpus of this many copies of the cookbook')
    ap.add_argument('--queries', type=int, default=2000)
    ap.add_argument('--chunk-size', type=int, default=1000)
    args = ap.parse_args()

    docs = load_folder(COOKBOOK)
    chars = sum(len(d.text) for d in docs)
    t = time.perf_counter(); chunks = split_documents(docs, chunk_size=args.chunk_size, chunk_overlap=args.chunk_size // 5)
    split_s = time.perf_counter() - t
    print(f"corpus: {len(docs)} documents, {chars:,} characters -> {len(chunks):,} chunks of <= {args.chunk_size} chars "
          f"(split in {split_s:.2f} s)")

    ds = known_item_queries(docs, chunks, args.queries)
    for label, cs in [('cookbook', chunks)] + ([(f'cookbook x{args.copies}', [
            type(c)(c.text, f'{i}/{c.doc_id}', c.index, c.start_index) for i in range(args.copies) for c in chunks])]
            if args.copies > 1 else []):
        r = BM25Retriever()
        best, med = best_of(lambda: r.index(cs))
        qs = ds.question.tolist()
        qbest, qmed = best_of(lambda: r.search(qs, k=10))
        print(f"BM25 index  {label:>14}: {len(cs):>7,} chunks  best {best:6.2f} s  median {med:6.2f} s  "
              f"-> {len(cs) / best:>9,.0f} chunks/s")
        print(f"BM25 search {label:>14}: {len(qs):>7,} queries best {qbest:6.2f} s  median {qmed:6.2f} s  "
              f"-> {len(qs) / qbest:>9,.0f} queries/s (k=10, batched)")

    rep = evaluate(ds, chunks, BM25Retriever(), ks=(1, 10))
    print(f"known-item sanity check: hit@1 {rep.mean('hit', 1):.3f}, hit@10 {rep.mean('hit', 10):.3f} "
          f"over {len(rep.per_question)} queries ({len(rep.skipped)} without ground truth)")

    sizes, overlaps, ks = (300, 600, 1200, 2400), (0, 0.2), (1, 3, 5, 10, 20)
    small = ds.head(500)
    t = time.perf_counter()
    sw = sweep(docs, small, BM25Retriever, chunk_sizes=sizes, overlaps=overlaps, ks=ks)
    wall = time.perf_counter() - t
    print(f"sweep: {len(sizes)} chunk sizes x {len(overlaps)} overlaps x {len(ks)} k, {len(small)} queries: "
          f"{wall:.2f} s wall ({wall / len(sw.reports):.2f} s per chunking: split, index, ground truth, search, score, bootstrap)")
    print(sw.results.query('k == 10')[['chunk_size', 'chunk_overlap', 'n_chunks', 'context_chars', 'hit', 'mrr', 'index_s', 'search_s']]
          .to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == '__main__':
    main()
