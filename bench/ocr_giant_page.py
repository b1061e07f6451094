"""Issue 49 (hostile round 4, item 6): OCR's peak memory and time on giant scanned pages, within the pixel budget.

    python bench/ocr_giant_page.py

Each case is a one- or two-page PDF of a few KB: a scanned-looking page (one picture filling it) of 3,000 pt and of
10,000 pt a side, and the 10,000 pt page before an ordinary letter page. Each is parsed offline with OCR
(`parse_pdf(..., offline=True)`, the first installed engine) in a process of its own; printed: the page sizes, the dpi
each page was read at, the pages read and failed, the warnings, seconds and peak RSS (before the budget: the 3,000 pt
page peaked at 1.6 GB, the 10,000 pt one ended the parse in a traceback with the ordinary page lost).
"""
import json, subprocess, sys, tempfile, time
from pathlib import Path

CASE = r'''
import json, resource, sys, time, pymupdf
from ragnb.docs.pdf import parse_pdf
sizes, out = json.loads(sys.argv[1]), sys.argv[2]
doc = pymupdf.open()
for w in sizes:
    p = doc.new_page(width=w, height=w)
    pix = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 400, 400), False); pix.clear_with(255)
    p.insert_image(p.rect, pixmap=pix)   # a blank "scan" filling the page
doc.save(out + '/in.pdf')
t0 = time.perf_counter()
res = parse_pdf(out + '/in.pdf', out + '/parsed', offline=True)
print(json.dumps(dict(sizes=sizes, dpi=[(p.ocr or {}).get('dpi') for p in res.pages],
                      failed=[p.page for p in res.pages if p.failure], warnings=[w for p in res.pages for w in p.warnings],
                      seconds=round(time.perf_counter() - t0, 1),
                      peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))))
'''


def main():
    for sizes in ([3000], [10000], [10000, 612]):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, '-c', CASE, json.dumps(sizes), d], capture_output=True, text=True,
                               timeout=1800)
            print(r.stdout.strip() or f"{sizes}: exit {r.returncode}: {r.stderr[-500:]}", flush=True)


if __name__ == '__main__': main()
