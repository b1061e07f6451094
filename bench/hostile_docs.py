"""Benchmark: peak memory (RSS) and wall time of `ragnb parse --offline` on the four unbounded documents of issue 27.

The documents are built in a temporary folder, at the issue's full size:

- `huge_image.pdf`: one letter page drawing one 30,000 x 30,000 greyscale image (900 Mpx) whose Flate stream of zeros
  is 0.9 MB on disk;
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
import argparse, os, re, struct, subprocess, sys, tempfile, time, zipfile, zlib
from pathlib import Path

SIDE = 30_000  # pixels of the huge image, each way

def pdf_bytes(objects:list[bytes])->bytes:
    "A PDF file of `objects` (object 1 is the catalog), with its cross-reference table."
    out, offsets = bytearray(b'%PDF-1.7\n%\xe2\xe3\xcf\xd3\n'), []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out)); out += b'%d 0 obj\n' % i + body + b'\nendobj\n'
    xref = len(out)
    out += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objects)+1)
    out += b''.join(b'%010d 00000 n \n' % o for o in offsets)
    out += b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objects)+1, xref)
    return bytes(out)

def zeros_flate(n:int, chunk:int=1 << 24)->bytes:
    "A zlib stream of `n` zero bytes, in a second: one compressed block repeated (full flushes make blocks alike)."
    c, block = zlib.compressobj(9, zlib.DEFLATED, -15), bytes(chunk)
    first = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)  # any later block compresses to these same bytes
    k, rest = divmod(n, chunk)
    body = (first + again * (k - 1) if k else b'') + c.compress(bytes(rest)) + c.flush()
    return b'\x78\xda' + body + struct.pack('>I', ((n % 65521) << 16) | 1)  # Adler-32 of n zeros

def image_pdf(path:Path, w:int=SIDE, h:int=SIDE):
    "A letter page drawing one `w` x `h` greyscale image (all black) over the whole page."
    data = zeros_flate(w * h)
    content = b'q 612 0 0 792 0 0 cm /Im1 Do Q'
    path.write_bytes(pdf_bytes([
        b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 5 0 R >> >> '
        b'/Contents 4 0 R >>',
        b'<< /Length %d >>\nstream\n' % len(content) + content + b'\nendstream',
        b'<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 '
        b'/Filter /FlateDecode /Length %d >>\nstream\n' % (w, h, len(data)) + data + b'\nendstream']))

def big_page_pdf(path:Path, side:float):
    "One `side` x `side` pt page with a line of text near its top-left corner."
    import pymupdf
    doc = pymupdf.open(); page = doc.new_page(width=side, height=side)
    page.insert_text((72, 72), f"A page of {side:g} x {side:g} points.", fontsize=24)
    doc.save(path)

def paragraphs_docx(path:Path, n:int=4_000_000):
    "A Word file whose document.xml holds `n` one-word paragraphs (about 35 bytes each)."
    ns = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'
    ctypes = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
              'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
              'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName='
              '"/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.'
              'document.main+xml"/></Types>')
    rels = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            'relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr('[Content_Types].xml', ctypes); z.writestr('_rels/.rels', rels)
        with z.open('word/document.xml', 'w', force_zip64=True) as f:
            f.write(f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{ns}"><w:body>'.encode())
            block = b'<w:p><w:r><w:t>x</w:t></w:r></w:p>' * 10_000
            for _ in range(n // 10_000): f.write(block)
            f.write(b'</w:body></w:document>')

CASES = {'huge_image.pdf': image_pdf, 'page_14400.pdf': lambda p: big_page_pdf(p, 14_400),
         'page_5000.pdf': lambda p: big_page_pdf(p, 5_000), 'paragraphs.docx': paragraphs_docx}

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
