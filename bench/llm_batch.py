"""Batch throughput of ragnb's LLM layer against the scripted test server with fixed latency.

Prints wall time and calls/s for N calls at several concurrency levels, next to the ideal (calls x latency / concurrency),
with the client's CPU time per call and the size of the call cache it wrote. `--trace both` runs each level without and
with traces (the LLM layer's per-call `Exchange`, kept in memory and in the cache's `requests` and `traces` tables).
Usage: python bench/llm_batch.py [--calls 1000] [--latency 0.2] [--concurrency 1,8,32,64] [--trace on|off|both]
"""
import argparse, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path
from ragnb.llm import LLM

ap = argparse.ArgumentParser()
ap.add_argument('--calls', type=int, default=1000)
ap.add_argument('--latency', type=float, default=0.2)
ap.add_argument('--concurrency', default='1,8,32,64')
ap.add_argument('--trace', choices=['on', 'off', 'both'], default='on', help='trace every call (the default), not, or both in turn')
a = ap.parse_args()

print(f"{a.calls} calls, {a.latency*1000:.0f} ms latency per call, fresh cache each run")
print(f"{'concurrency':>11} {'trace':>5} {'wall s':>8} {'ideal s':>8} {'overhead':>9} {'calls/s':>8} {'client CPU ms/call':>18} {'cache KB':>8}")
# the server runs in its own process, so its work does not share the client's interpreter lock
with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
from pathlib import Path as _P
srv = subprocess.Popen([str(_P(sys.executable).with_name('ragnb')), 'scripted-server', '--port', str(port), '--latency', str(a.latency)],
                       stdout=subprocess.DEVNULL)
base_url = f'http://127.0.0.1:{port}/v1'
for _ in range(1200):
    try: urllib.request.urlopen(base_url + '/models'); break
    except OSError: time.sleep(0.1)
try:
    for c in map(int, a.concurrency.split(',')):
        for trace in {'on': [True], 'off': [False], 'both': [False, True]}[a.trace]:
            with tempfile.TemporaryDirectory() as d:
                llm = LLM(base_url=base_url, api_key='bench', model='scripted-test-model', cache_path=Path(d)/'c.sqlite',
                          concurrency=c, progress=False)
                llm.tracing = trace
                reqs = [[{'role': 'user', 'content': f'benchmark question {c}-{i}'}] for i in range(a.calls)]
                t, cpu = time.perf_counter(), time.process_time(); rs = llm.batch(reqs, show_estimate=0)
                wall, cpu = time.perf_counter() - t, time.process_time() - cpu
                llm.cache.checkpoint(); kb = (Path(d)/'c.sqlite').stat().st_size / 1024
            assert all(r.ok for r in rs), [str(r.failure) for r in rs if not r.ok][:3]
            assert all((r.trace is not None) == trace for r in rs)
            ideal = a.calls * a.latency / c
            over = f"{100*(wall/ideal-1):>8.1f}%" if ideal else f"{'–':>9}"
            print(f"{c:>11} {'on' if trace else 'off':>5} {wall:>8.2f} {ideal:>8.2f} {over} {a.calls/wall:>8.1f} "
                  f"{1000*cpu/a.calls:>18.2f} {kb:>8.0f}", flush=True)
finally: srv.terminate()
