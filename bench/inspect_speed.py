"""Issue 42: how long `inspect_testset` takes on a large test set, without model calls (target: 10,000 questions in
under 30 s). Synthetic rows: random questions of 8-14 words over 2,000 passages of 50 documents, with evidence offsets.

    python bench/inspect_speed.py [N]     # default 10000
"""
import random, sys, time
import pandas as pd
from ragnb.rag.inspect import inspect_testset

WORDS = ('river mountain city bridge engine protein market theory poem planet ocean forest law vote tax bank '
         'language music storm harbour castle railway glacier desert vaccine satellite').split()

def testset(n:int, seed:int=0) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        d, c = rng.randrange(50), rng.randrange(2000)
        q = ' '.join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))).capitalize() + '?'
        rows.append(dict(id=f'q{i}', question=q, answer='x', evidence=' '.join(rng.choice(WORDS) for _ in range(12)),
                         source_doc=f'doc{d}.md', chunk_id=f'doc{d}.md#{c}', kept=rng.random() < 0.8,
                         context=' '.join(rng.choice(WORDS) for _ in range(80)), evidence_found=True,
                         evidence_start=c * 500 + rng.randrange(400), evidence_end=c * 500 + 450,
                         question_language='en', question_type='factoid'))
    return pd.DataFrame(rows)

if __name__ == '__main__':
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    df = testset(n)
    t0 = time.perf_counter(); rep = inspect_testset(df, languages=['en']); s = time.perf_counter() - t0
    print(rep)
    print(f"\n{n:,} questions ({rep.kept:,} kept) inspected in {s:.1f} s")
