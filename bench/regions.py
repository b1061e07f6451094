"""Region detection (ragnb.pdf.page_regions) against human ICDAR-2013 table regions, and its speed.

Prints, for eu-001.pdf and eu-004.pdf: table recall at IoU >= 0.5 (a human table is covered when some region
overlaps it that well), the share of regions that overlap no human table at all ("stray": figures, logos, boxed
text, or noise), for ragnb's defaults and for the seed's block-level absorption (text absorbed by PyMuPDF block, blank spans ignored,
underlines kept). Then pages per second of region detection on eu-004.pdf (3,630 drawings) and
amt_handbook_sample.pdf (one page: 355 drawings, 9 embedded images placed 166 times).

    python bench/regions.py [--repeat 5]
"""
import argparse, time
from pathlib import Path
import pymupdf
from ragnb.pdf import icdar_tables, iou, page_regions
from ragnb.samples import sample_path

DOCS = sample_path('documents')
EU = DOCS/'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu'
SETTINGS = {'ragnb defaults': {}, 'seed blocks+underl.': dict(by_line=False, drop_underlines=False)}

def quality(name, **kw):
    "Recall at IoU>=0.5, misses, number of regions, stray regions for one ICDAR document."
    doc = pymupdf.open(EU/f'{name}.pdf')
    truth = icdar_tables(EU/f'{name}-reg.xml', doc)
    regions = {p.number+1: page_regions(p, **kw) for p in doc}
    best = [max([iou(box, r) for r in regions[pno]], default=0.) for pno, box in truth]
    misses = [(pno, round(b, 2)) for (pno, _), b in zip(truth, best) if b < 0.5]
    allr = [(pno, r) for pno, rs in regions.items() for r in rs]
    stray = [(pno, r) for pno, r in allr if all(iou(r, box) == 0 for p2, box in truth if p2 == pno)]
    return sum(b >= 0.5 for b in best), len(truth), misses, len(allr), len(stray), sum(best)/len(best)

def speed(path, repeat):
    "Best-of-`repeat` pages per second of page_regions over a whole document (file already open)."
    doc = pymupdf.open(path)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for p in doc: page_regions(p)
        times.append(time.perf_counter() - t)
    return doc.page_count, sum(len(p.get_drawings()) for p in doc), doc.page_count/min(times), doc.page_count/(sum(times)/len(times))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--repeat', type=int, default=5); a = ap.parse_args()
    print('Table regions vs human ICDAR-2013 (IoU >= 0.5)')
    print(f"{'setting':<20} {'document':<8} {'recall':>9} {'mean best IoU':>14} {'regions':>8} {'stray':>12}  misses (page, best IoU)")
    for label, kw in SETTINGS.items():
        for name in ('eu-001', 'eu-004'):
            hit, n, misses, nr, ns, miou = quality(name, **kw)
            print(f"{label:<20} {name:<8} {hit:>3}/{n:<3} {hit/n:>4.0%} {miou:>14.3f} {nr:>8} {ns:>3} ({ns/max(nr,1):>5.1%})  {misses or ''}")
    print(f'\nSpeed (best and mean of {a.repeat} runs)')
    for f in (EU/'eu-004.pdf', DOCS/'docling/tests/data/pdf/sources/amt_handbook_sample.pdf'):
        n, nd, best, mean = speed(f, a.repeat)
        print(f"{f.name:<26} {n:>3} pages {nd:>5} drawings  {best:7.1f} pages/s best  {mean:7.1f} pages/s mean")
