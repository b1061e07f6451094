"""Region detection (ragnb.docs.pdf.pdf_regions) against human ICDAR-2013 table regions, per detector and for their union.

For every human table region (a table spanning pages has one per page) it reports two recalls: the share of human
tables with at least 90% of their area inside one detected region, and the share matched by a region at IoU >= 0.5.
"No table" counts detected regions that overlap no human table at all: ICDAR marks tables only, so real figures count
there too; the `table` kind's share is the detector's false tables. Pages/s is wall time of `pdf_regions` with the cache
off (one process unless told otherwise), on whatever else this machine is doing; CPU s/page is this process's CPU
time per page, which does not depend on the machine's other load.

Configurations: the seed (`detectors=['drawings'], decorations=True`: the drawing/image clustering alone, unchanged),
the rule-based table finder alone, the layout model alone (pymupdf >= 2), the union without the layout model (what
pymupdf 1.x gives) and the default union of all three. Then
the union again with `--workers` processes (default 2), checked to give the same regions.

    python bench/regions.py [--docs eu-001,us-033] [--dir FOLDER] [--workers 2] [--sheet strays.png] [--configs NAMES] [--data SHARED]

`--dir` takes any folder of `ID.pdf` + `ID-reg.xml` pairs (ICDAR-2013 format, e.g. documents kept apart from the
project). `--sheet` draws every union region that overlaps no human table on one contact sheet, for a visual audit.
"""
import argparse, sys, time
from collections import Counter
from pathlib import Path
import pymupdf
sys.path.insert(0, str(Path(__file__).resolve().parent))
from icdar import dev_docs, shared_dir, truth_regions
from ragnb.docs.pdf import has_layout, iou, regions_many

def inside(t, r)->float:
    "Share of box t's area inside box r."
    ix, iy = max(0, min(t[2], r[2])-max(t[0], r[0])), max(0, min(t[3], r[3])-max(t[1], r[1]))
    return ix*iy/max(1e-9, (t[2]-t[0])*(t[3]-t[1]))

def run(docs, workers=1, **kw):
    "{(doc, page): [Region]} for every page of `docs`, the wall seconds it took and this process's CPU seconds."
    out, t, c = {}, time.perf_counter(), time.process_time()
    for d, rs in regions_many(docs, workers=workers, cache=False, **kw).items():
        for r in rs: out.setdefault((Path(d).stem, r.page), []).append(r)
    return out, time.perf_counter() - t, time.process_time() - c

def quality(found, truth):
    "Recall at >= 90% inside and at IoU >= 0.5, missed tables, regions, regions overlapping no table (all, by kind)."
    n = c90 = c50 = 0; missed = []
    for k, ts in truth.items():
        for t in ts:
            rs = [r.bbox for r in found.get(k, [])]
            a, b = max([inside(t, r) for r in rs], default=0) >= 0.9, max([iou(t, r) for r in rs], default=0) >= 0.5
            n += 1; c90 += a; c50 += b
            if not (a and b): missed.append(f"{k[0]} p{k[1]}")
    regs = [(k, r) for k, rs in found.items() for r in rs]
    stray = [(k, r) for k, r in regs if all(iou(r.bbox, t) == 0 for t in truth.get(k, []))]
    return dict(n=n, in90=c90/max(n, 1), iou50=c50/max(n, 1), regions=len(regs), stray=len(stray),
                by_kind=Counter(r.kind for _, r in regs), stray_kind=Counter(r.kind for _, r in stray), missed=missed), stray

def sheet(stray, paths, out, per_row=6, size=260):
    "A contact sheet of regions (one cell each, labelled with document, page, kind and source)."
    rows = max(1, (len(stray)+per_row-1)//per_row)
    doc = pymupdf.open(); pg = doc.new_page(width=per_row*size, height=rows*(size+20))
    for i, (k, r) in enumerate(stray):
        src = pymupdf.open(paths[k[0]]); clip = pymupdf.Rect(r.bbox) & src[k[1]-1].rect
        x, y = (i % per_row)*size, (i//per_row)*(size+20)
        s = min((size-10)/clip.width, (size-10)/clip.height)
        tgt = pymupdf.Rect(x+5, y+18, x+5+clip.width*s, y+18+clip.height*s)
        pg.show_pdf_page(tgt, src, k[1]-1, clip=clip); pg.draw_rect(tgt, color=(1, 0, 0), width=.5)
        pg.insert_text((x+5, y+12), f"{k[0]} p{k[1]} {r.kind} {'+'.join(r.source)}", fontsize=8)
    pg.get_pixmap(dpi=60).save(out)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--docs', help='comma-separated document stems (default: all)')
    ap.add_argument('--dir', help='a folder of ID.pdf + ID-reg.xml pairs (default: the shared ICDAR-2013 set)')
    ap.add_argument('--data', help='shared data folder (default: ragnb.core.samples.shared_root(): $RAGNB_SHARED_DATA, else the shared folder beside the repository)')
    ap.add_argument('--workers', type=int, default=2, help='processes for the second union run (0: skip it)')
    ap.add_argument('--sheet', help='PNG contact sheet of the union regions that overlap no human table')
    ap.add_argument('--configs', help='comma-separated configuration names to run (default: all)')
    a = ap.parse_args()
    names = a.docs.split(',') if a.docs else None
    if a.dir: docs = sorted(p for p in Path(a.dir).rglob('*.pdf') if p.with_name(p.stem+'-reg.xml').exists() and (not names or p.stem in names))
    else: docs = dev_docs(shared_dir(a.data), names)
    truth = {}
    for d in docs:
        doc = pymupdf.open(d)
        for pno, bb in truth_regions(d, doc): truth.setdefault((d.stem, pno), []).append(bb)
    pages = sum(pymupdf.open(d).page_count for d in docs)
    print(f"pymupdf {pymupdf.VersionBind}, layout model {'installed' if has_layout() else 'absent'}; "
          f"{len(docs)} documents, {pages} pages, {sum(map(len, truth.values()))} human table regions\n")
    configs = {'seed (drawings)': dict(detectors=['drawings'], decorations=True), 'table finder': dict(detectors=['tables']),
               'layout': dict(detectors=['layout']), 'union without layout': dict(detectors=['drawings', 'tables']),
               'union (default)': {}}
    if not has_layout(): del configs['layout']
    if a.configs: configs = {k: v for k, v in configs.items() if k in a.configs.split(',')}
    print("| detector | in one region >= 90% | IoU >= 0.5 | regions | overlapping no table | tables overlapping no table | pages/s | CPU s/page |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    for name, kw in configs.items():
        found, secs, cpu = run(docs, **kw)
        q, stray = quality(found, truth); results[name] = (found, q, stray)
        print(f"| {name} | {q['in90']:.1%} | {q['iou50']:.1%} | {q['regions']} | {q['stray']} ({q['stray']/max(q['regions'], 1):.1%}) "
              f"| {q['stray_kind']['table']} of {q['by_kind']['table']} ({q['stray_kind']['table']/max(q['by_kind']['table'], 1):.1%}) | {pages/secs:.2f} | {cpu/pages:.2f} |", flush=True)
    if 'union (default)' not in results: sys.exit(0)
    found, q, stray = results['union (default)']
    print(f"\nunion: regions by kind {dict(q['by_kind'])}; overlapping no table by kind {dict(q['stray_kind'])}")
    print(f"union misses (page of a human table not covered on both measures): {q['missed'] or 'none'}")
    for doc in ('eu-001', 'eu-004'):
        sub = {k: v for k, v in truth.items() if k[0] == doc}
        if not sub: continue
        line = []
        for name, (f, _, _) in results.items():
            qq, _ = quality({k: v for k, v in f.items() if k[0] == doc}, sub)
            line.append(f"{name} {round(qq['iou50']*qq['n'])}/{qq['n']} (IoU), {round(qq['in90']*qq['n'])}/{qq['n']} (90%), {qq['stray']} of {qq['regions']} no table")
        print(f"{doc}: " + '; '.join(line))
    if a.workers > 1:
        f2, secs, _ = run(docs, workers=a.workers)
        same = {k: [(r.bbox, r.kind, r.source) for r in v] for k, v in f2.items()} == {k: [(r.bbox, r.kind, r.source) for r in v] for k, v in found.items()}
        print(f"\nunion with {a.workers} worker processes: {pages/secs:.2f} pages/s; same regions as one process: {'yes' if same else 'NO'}")
    if a.sheet:
        sheet(sorted(stray, key=lambda s: s[0]), {d.stem: d for d in docs}, a.sheet)
        print(f"contact sheet of the {len(stray)} union regions overlapping no table: {a.sheet}")
