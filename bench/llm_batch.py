"""Batch throughput of ragnb's LLM layer against the scripted test server with fixed latency.

Prints wall time and calls/s for N calls at several concurrency levels, next to the ideal (calls x latency / concurrency).
Usage: python bench/llm_batch.py [--calls 1000] [--latency 0.2] [--concurrency 1,8,32,64]
"""
import argparse, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path
from ragnb.llm import LLM

ap = argparse.ArgumentParser()
ap.add_argument('--calls', type=int, default=1000)
ap.add_argument('--latency', type=float, default=0.2)
ap.add_argument('--concurrency', default='1,8,32,64')
a = ap.parse_args()

print(f"{a.calls} calls, {a.latency*1000:.0f} ms latency per call, fresh cache each run")
print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'overhead':>9} {'calls/s':>8} {'client CPU ms/call':>18}")
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
        with tempfile.TemporaryDirectory() as d:
            llm = LLM(base_url=base_url, api_key='bench', model='scripted-test-model', cache_path=Path(d)/'c.sqlite',
                      concurrency=c, progress=False)
            reqs = [[{'role': 'user', 'content': f'benchmark question {c}-{i}'}] for i in range(a.calls)]
            t, cpu = time.perf_counter(), time.process_time(); rs = llm.batch(reqs, show_estimate=0)
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        assert all(r.ok for r in rs), [str(r.failure) for r in rs if not r.ok][:3]
        ideal = a.calls * a.latency / c
        print(f"{c:>11} {wall:>8.2f} {ideal:>8.2f} {100*(wall/ideal-1):>8.1f}% {a.calls/wall:>8.1f} {1000*cpu/a.calls:>18.2f}", flush=True)
finally: srv.terminate()
