"""Benchmark: peak memory (RSS) of loading, splitting and grounding evidence in three 20 MB markdown files.

Grounding falls back to the whole document when the evidence is not in its passage, which normalises the whole text
(`ragnb.docs.evidence.normalise`). Peak memory should stay proportional to the largest document, not grow with the number
of documents. Each stage prints the process's peak RSS so far (Linux/macOS `ru_maxrss`).
Usage: python bench/memory.py [--files 3] [--mb 20]
"""
import argparse, random, resource, sys, tempfile, time
from pathlib import Path
from ragnb.docs.documents import load_documents, split_documents
from ragnb.docs.evidence import ground

WORDS = ('model retrieval passage evidence question answer document token embedding prompt context system user '
         'the a of and to in is for on with as by that this it be are from or an at which can their each').split()

def peak_mb() -> float:
    "Peak resident memory of this process so far, in MB."
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1 << 20) if sys.platform == 'darwin' else r / 1024

def _code(seed:int, k:int) -> str: return random.Random(seed * 1_000_003 + k).getrandbits(64).to_bytes(8, 'big').hex()

def write_doc(path:Path, mb:float, seed:int):
    "A markdown file of about `mb` MB: headings and paragraphs of random words, one quotable sentence per section."
    rng, out, n = random.Random(seed), [], 0
    while n < mb * 1e6:
        para = ' '.join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))).capitalize() + '.'
        block = f"## Section {len(out)}\n\n{para}\n\nThe \"{_code(seed, len(out))}\" code is quoted here.\n\n"
        out.append(block); n += len(block)
    path.write_text(''.join(out))

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--files', type=int, default=3)
    ap.add_argument('--mb', type=float, default=20, help='size of each file in MB')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.files): write_doc(Path(tmp)/f'doc{i}.md', a.mb, i)
        print(f"{a.files} files of {a.mb:g} MB; peak RSS after writing them: {peak_mb():.0f} MB")
        t0 = time.perf_counter()
        docs = load_documents(tmp)
        print(f"loaded {len(docs)} documents, {docs.chars / 1e6:.0f} M characters: peak RSS {peak_mb():.0f} MB")
        chunks = split_documents(docs)
        print(f"split into {len(chunks):,} chunks: peak RSS {peak_mb():.0f} MB")
        found = 0
        for d in docs:  # evidence quoted with other quotes and case, from another passage: found only in the whole document
            first = next(c for c in chunks if c.doc_id == d.id)
            for k in (5, 5000, 20000):
                ev = f"THE \u201c{_code(int(d.id[3:-3]), k)}\u201d code is quoted here."
                found += ground(ev, first, d) is not None
        print(f"grounded {found}/{3 * len(docs)} misquoted evidences against whole documents: peak RSS {peak_mb():.0f} MB")
        print(f"total {time.perf_counter() - t0:.1f} s; largest document {max(len(d.text) for d in docs) / 1e6:.0f} M characters; "
              f"peak RSS {peak_mb():.0f} MB")

if __name__ == '__main__': main()
