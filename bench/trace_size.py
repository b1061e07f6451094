"""Size of the call cache with and without traces, for synthetic QA generated from the OpenAI cookbook.

Generates questions (one per passage, three critiques each) with ragnb's scripted model twice, into two fresh caches:
once with `llm.tracing = False` (replies only) and once with traces (plus each request, compressed, and a trace row per
call). Prints the file sizes after a checkpoint and VACUUM, and the bytes per call of each table's content.
Usage: python bench/trace_size.py [--docs nbs/data/openai-cookbook] [--max-chunks N]
"""
import argparse, sqlite3, tempfile, time
from pathlib import Path
from ragnb.docs.documents import load_folder
from ragnb.synth.generate import generate_dataset
from ragnb.core.llm import LLM
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path

ap = argparse.ArgumentParser()
ap.add_argument('--docs', default=str(sample_path('openai-cookbook')))
ap.add_argument('--max-chunks', type=int, default=None, help='seeded sample of passages (default: all)')
a = ap.parse_args()

docs = load_folder(Path(a.docs))
sizes = {}
with ScriptedServer() as srv, tempfile.TemporaryDirectory() as d:
    for trace in (False, True):
        path = Path(d)/f'trace-{trace}.sqlite'
        llm = LLM(base_url=srv.base_url, api_key='bench', model='scripted-test-model', cache_path=path, progress=False)
        llm.tracing = trace
        t = time.perf_counter()
        ds = generate_dataset(docs, llm, max_chunks=a.max_chunks)
        secs = time.perf_counter() - t
        llm.cache.checkpoint(); llm.cache._conn().execute('VACUUM')
        c = sqlite3.connect(path)
        tables = {name for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        q = {'calls': 'SELECT COUNT(*), SUM(LENGTH(key) + LENGTH(record)) FROM calls',
             'requests': 'SELECT COUNT(*), SUM(LENGTH(key) + LENGTH(body)) FROM requests',
             'traces': 'SELECT COUNT(*), SUM(LENGTH(item) + LENGTH(key) + LENGTH(run) + 8 + LENGTH(record)) FROM traces'}
        content = {t: c.execute(s).fetchone() for t, s in q.items() if t in tables}
        sizes[trace] = path.stat().st_size
        print(f"traces {'on ' if trace else 'off'}: {ds.stats['chunks']} passages, {ds.stats['calls']} calls, {secs:.1f} s; "
              f"file {sizes[trace]/1e6:.2f} MB ({sizes[trace]/ds.stats['calls']:.0f} B/call); content per call: "
              + ', '.join(f"{t} {n and b/n:.0f} B" for t, (n, b) in content.items()), flush=True)
print(f"traces add {(sizes[True]-sizes[False])/1e6:.2f} MB: x{sizes[True]/sizes[False]:.2f} the replies-only cache")
