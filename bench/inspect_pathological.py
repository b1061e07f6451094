"""Issue 49 (hostile round 4, item 7): `ragnb inspect` on pathological test sets, time and peak memory.

    python bench/inspect_pathological.py [--rows 10000]

Three sets of `--rows` kept questions, each written to a JSONL file and inspected by the command line in a process of
its own (peak RSS read from the OS when it ends):
- `repeated`: one question, `--rows` times (before: 1,000 copies took 30 s and 505 MB, 3,000 took 8 min and 3.2 GB)
- `one span`: distinct questions all resting on one evidence span (before: 1,000 took 30 s and 483 MB)
- `long`: five questions of 1 MB each among short distinct ones (before: five alone gave no report within 60 s)
Printed: rows, file size, seconds, peak RSS, and the report's lines on near-duplicates and shared evidence.
"""
import argparse, json, subprocess, sys, tempfile, time
from pathlib import Path

CLI = ('import atexit, resource, sys\n'   # the peak RSS of this process, said when it ends
       'atexit.register(lambda: print(f"PEAK_RSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", '
       'file=sys.stderr))\nfrom ragnb.app.cli import main; raise SystemExit(main())')


def rows(kind:str, n:int):
    for i in range(n):
        q = f"What does setting number {i} of the streaming client control?"
        if kind == 'repeated': q = "How do I stream a reply from the chat completions API?"
        if kind == 'long' and i < 5: q = f"Question {i}: " + ' '.join(f"word{j % 997}" for j in range(130_000))
        yield dict(id=f"q{i}", question=q, answer='a', evidence='The client streams tokens as they come.',
                   source_doc=f"doc{i % 7}.md", chunk_id=f"doc{i % 7}.md#{i % 50}",
                   context=f"Passage {i % 50} about streaming and tokens.", kept=True,
                   evidence_start=0 if kind == 'one span' else (i % 50) * 100,
                   evidence_end=40 if kind == 'one span' else (i % 50) * 100 + 40, evidence_found=True)


def run(kind:str, n:int, tmp:Path) -> dict:
    f = tmp/f"{kind.replace(' ', '_')}.jsonl"
    with open(f, 'w') as out:
        for r in rows(kind, n): out.write(json.dumps(r) + '\n')
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, '-c', CLI, 'inspect', str(f)], capture_output=True, text=True, timeout=900)
    secs = time.perf_counter() - t0
    peak = int(p.stderr.rsplit('PEAK_RSS_KB ', 1)[-1].split()[0]) / 1024 if 'PEAK_RSS_KB' in p.stderr else -1
    lines = [l.strip() for l in p.stdout.splitlines() if 'near-duplicate questions' in l or 'questions sharing' in l]
    return dict(set=kind, rows=n, mb=round(f.stat().st_size / 1e6, 1), exit=p.returncode, seconds=round(secs, 1),
                peak_rss_mb=round(peak), report=' | '.join(' '.join(l.split()) for l in lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rows', type=int, default=10_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for kind in ('repeated', 'one span', 'long'):   # one process each
            print(json.dumps(run(kind, a.rows, Path(d))), flush=True)


if __name__ == '__main__': main()
