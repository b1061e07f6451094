"""Benchmark: peak memory (RSS) and wall time of `ragnb parse --offline` on the four unbounded documents of issue 27.

The documents are built in a temporary folder, at the issue's full size:

- `huge_image.pdf`: one letter page drawing one 30,000 x 30,000 greyscale image (900 Mpx) whose Flate stream of zeros
  is 0.9 MB on disk;

(built by `ragnb.testing.hostile`, the same builders the tests use, at smaller sizes)
- `page_14400.pdf`: one 14,400 x 14,400 pt page (200 inches, the largest page a PDF may declare) with a line of text;
- `page_5000.pdf`: one 5,000 x 5,000 pt page with a line of text (zoom 3 would render it 15,000 px wide);
- `paragraphs.docx`: a 0.4 MB Word file whose `word/document.xml` is 140 MB: 4 million one-word paragraphs.

Each case runs `ragnb parse FILE --out DIR --offline` in its own process under `/usr/bin/time -v` (peak RSS from its
"Maximum resident set size", wall time from the clock) with a deadline of `--timeout` seconds, and prints the exit
code, the first line of its error output, and the size of the largest page image written.
`--code DIR` runs another checkout's ragnb (its folder goes first on PYTHONPATH), to compare before and after:

    python bench/hostile_docs.py                      # this checkout
    python bench/hostile_docs.py --code /path/to/other/checkout
"""
import argparse, os, re, subprocess, sys, tempfile, time
from pathlib import Path
from ragnb.testing.hostile import big_page_pdf, paragraphs_docx, picture_pdf

SIDE = 30_000  # pixels of the huge image, each way

CASES = {'huge_image.pdf': lambda p: picture_pdf(p, SIDE, SIDE, rows=None),  # every pixel stored: 0.9 MB of zeros
         'page_14400.pdf': lambda p: big_page_pdf(p, 14_400),
         'page_5000.pdf': lambda p: big_page_pdf(p, 5_000), 'paragraphs.docx': lambda p: paragraphs_docx(p, 4_000_000)}

def largest_image(folder:Path)->str:
    "Width x height of the largest PNG in `folder` (read from its header), or '-'."
    best = None
    for f in folder.glob('*.png'):
        head = f.open('rb').read(24)
        w, h = int.from_bytes(head[16:20], 'big'), int.from_bytes(head[20:24], 'big')
        if best is None or w * h > best[0] * best[1]: best = (w, h)
    return f"{best[0]} x {best[1]}" if best else '-'

def run(file:Path, out:Path, code:str|None, timeout:float)->dict:
    "Run `ragnb parse --offline` on `file` under /usr/bin/time -v: peak RSS (MB), wall time (s), exit code, error."
    env = dict(os.environ, RAGNB_CACHE_DIR=str(out.parent/'cache'))
    if code: env['PYTHONPATH'] = code + os.pathsep + env.get('PYTHONPATH', '')
    cmd = ['/usr/bin/time', '-v', 'timeout', str(timeout), sys.executable, '-c',
           'import sys; from ragnb.app.cli import main; sys.exit(main())', 'parse', str(file), '--out', str(out),
           '--offline']
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = re.search(r'Maximum resident set size \(kbytes\): (\d+)', p.stderr)
    errs = [l.strip() for l in p.stderr.splitlines() if l.strip() and not l.startswith('\t')
            and 'Command exited' not in l and 'Command terminated' not in l]
    return dict(rss=int(rss[1]) / 1024 if rss else float('nan'), wall=wall,
                rc='timeout' if p.returncode == 124 else p.returncode,
                err=(errs[-1] if errs else '')[:110], image=largest_image(out) if out.exists() else '-')

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--code', help="a checkout whose ragnb to run (default: the installed/PYTHONPATH one)")
    ap.add_argument('--timeout', type=float, default=300, help='seconds per case (default: %(default)g)')
    ap.add_argument('--cases', default=','.join(CASES), help='comma-separated (default: all four)')
    a = ap.parse_args()
    if not Path('/usr/bin/time').exists(): sys.exit('needs /usr/bin/time (apt-get install time)')
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print(f"{'case':<16} {'file MB':>8} {'peak RSS MB':>12} {'wall s':>7} {'exit':>7}  "
              f"{'largest image':<15} last error line")
        for name in a.cases.split(','):
            f = tmp/name; CASES[name](f)
            r = run(f, tmp/f"out-{f.stem}", a.code, a.timeout)
            print(f"{name:<16} {f.stat().st_size/1e6:>8.2f} {r['rss']:>12.0f} {r['wall']:>7.1f} {r['rc']!s:>7}  "
                  f"{r['image']:<15} {r['err']}", flush=True)
            f.unlink()

if __name__ == '__main__': main()
