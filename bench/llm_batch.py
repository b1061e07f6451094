"""Batch throughput of ragnb's LLM layer against the scripted test server with fixed latency.

Prints wall time and calls/s for N calls at several concurrency levels, next to the ideal (calls x latency / concurrency),
the client's CPU per call and the server's (its own process). `--path fast` is ragnb's plain aiohttp path for ordinary
chat calls, `--path typed` the `openai` client for every call (`LLM(fast=False)`), `--path both` runs each.
`--trace both` runs each level without and with traces (the per-call `Exchange`, kept in memory and in the cache's
`requests` and `traces` tables); the last column is the size of the call cache each run wrote.
Usage: python bench/llm_batch.py [--calls 1000] [--latency 0.2] [--concurrency 1,8,32,64] [--path both] [--trace on|off|both] [--repeat 1]
"""
import argparse, os, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path
from ragnb.core.llm import LLM, Pacing

ap = argparse.ArgumentParser()
ap.add_argument('--calls', type=int, default=1000)
ap.add_argument('--latency', type=float, default=0.2)
ap.add_argument('--concurrency', default='1,8,32,64')
ap.add_argument('--path', choices=['fast', 'typed', 'both'], default='both')
ap.add_argument('--trace', choices=['on', 'off', 'both'], default='on', help='trace every call (the default), not, or both in turn')
ap.add_argument('--repeat', type=int, default=1)
a = ap.parse_args()

print(f"{a.calls} calls, {a.latency*1000:.0f} ms latency per call, fresh cache each run")
print(f"{'path':>6} {'trace':>5} {'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'overhead':>9} {'calls/s':>8} {'client CPU ms/call':>18} {'server CPU ms/call':>18} {'cache KB':>8}")
# the server runs in its own process, so its work does not share the client's interpreter lock
with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
srv = subprocess.Popen([str(Path(sys.executable).with_name('ragnb')), 'scripted-server', '--port', str(port), '--latency', str(a.latency)],
                       stdout=subprocess.DEVNULL)
base_url = f'http://127.0.0.1:{port}/v1'
for _ in range(1200):
    try: urllib.request.urlopen(base_url + '/models'); break
    except OSError: time.sleep(0.1)
def server_cpu():
    "CPU seconds used so far by the server process (all its threads)."
    with open(f'/proc/{srv.pid}/stat') as f: fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

configs = [(p, c, t) for _ in range(a.repeat) for p in (['fast', 'typed'] if a.path == 'both' else [a.path])
           for c in map(int, a.concurrency.split(',')) for t in {'on': [True], 'off': [False], 'both': [False, True]}[a.trace]]
try:
    for path, c, trace in configs:
        with tempfile.TemporaryDirectory() as d:
            llm = LLM(base_url=base_url, api_key='bench', model='scripted-test-model', cache_path=Path(d)/'c.sqlite',
                      pacing=Pacing(concurrency=c), progress=False, fast=path == 'fast')
            llm.tracing = trace
            reqs = [[{'role': 'user', 'content': f'benchmark question {c}-{i}'}] for i in range(a.calls)]
            t, cpu, scpu = time.perf_counter(), time.process_time(), server_cpu(); rs = llm.batch(reqs, show_estimate=0)
            wall, cpu, scpu = time.perf_counter() - t, time.process_time() - cpu, server_cpu() - scpu
            llm.cache.checkpoint(); kb = (Path(d)/'c.sqlite').stat().st_size / 1024
        assert all(r.ok for r in rs), [str(r.failure) for r in rs if not r.ok][:3]
        assert all((r.trace is not None) == trace for r in rs)
        ideal = a.calls * a.latency / c
        print(f"{path:>6} {'on' if trace else 'off':>5} {c:>11} {wall:>8.2f} {ideal:>8.2f} {100*(wall/ideal-1):>8.1f}% {a.calls/wall:>8.1f} {1000*cpu/a.calls:>18.2f} {1000*scpu/a.calls:>18.2f} {kb:>8.0f}", flush=True)
finally: srv.terminate()
