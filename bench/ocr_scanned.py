"""Issue 43: scanned PDFs read offline, per OCR engine, against the born-digital truth.

    python bench/ocr_scanned.py [--docs eu-001,us-012] [--dpi 300] [--ocr-dpi 300] [--engines tesseract,...]

A scanned test set with a known truth: ICDAR-2013 documents (shared data) rendered page by page at `--dpi` into
image-only PDFs (`ragnb.docs.ocr.scanned_copy`). Each installed engine reads every page (`ocr_copy`, mode `always`)
at `--ocr-dpi` (default: the scan's own; `ragnb parse` reads at 300 whatever the scan's resolution);
then per page: word recall (the born-digital text layer's words, with repeats, found in the OCR text), character error
rate (edit distance between the two texts with whitespace collapsed, over the born-digital length; reading order counts
against it), and seconds; and per engine the table cells of ragnb's offline parse of the OCR copy against the human
cells (bench/tables.py's matching), beside the born-digital parse of the same pages. Default documents: ten of the
development set, every fifth by name from the second (`eu-002` ...), fixed so reruns compare.
"""
import argparse, re, sys, tempfile, time
from pathlib import Path

import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from icdar import dev_docs, shared_dir
from tables import score, html_grids
from ragnb.docs.ocr import OCR_ENGINES, ocr_copy, scanned_copy, word_recall


def cer(truth:str, got:str) -> float:
    from rapidfuzz.distance import Levenshtein
    a, b = re.sub(r'\s+', ' ', truth).strip(), re.sub(r'\s+', ' ', got).strip()
    return Levenshtein.distance(a, b) / max(1, len(a))


def parsed_tables(copies:dict):
    "A bench/tables.py method: ragnb's offline parse of the copy standing for each born-digital file."
    def run(path, doc):
        from ragnb.docs.pdf import offline_page, pdf_regions
        c = copies[str(path)]
        cdoc = pymupdf.open(c)
        regs = pdf_regions(c, cache=False)
        return {p.number + 1: [g for h in offline_page(p, [r for r in regs if r.page == p.number + 1]).tables.values()
                               for g in html_grids(h)] for p in cdoc}
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--docs', help='comma-separated document stems (default: ten, every fifth of the set)')
    ap.add_argument('--dpi', type=int, default=300, help="the scan's resolution")
    ap.add_argument('--ocr-dpi', type=int, help="the resolution OCR reads at (default: --dpi; ragnb parse's is 300)")
    ap.add_argument('--engines', default=','.join(OCR_ENGINES))
    ap.add_argument('--data', help='shared data folder')
    a = ap.parse_args()
    docs = dev_docs(shared_dir(a.data), a.docs.split(',') if a.docs else None)
    if not a.docs: docs = docs[1::5][:10]
    work = Path(tempfile.mkdtemp(prefix='ragnb-ocr-bench-'))
    scans = {str(d): scanned_copy(d, work/f"{d.stem}-scan.pdf", a.dpi) for d in docs}
    pages = sum(pymupdf.open(d).page_count for d in docs)
    print(f"pymupdf {pymupdf.VersionBind}; {len(docs)} documents ({', '.join(d.stem for d in docs)}), {pages} pages, "
          f"scanned at {a.dpi} dpi, read at {a.ocr_dpi or a.dpi} dpi\n")
    f, h, w, nt, s, _ = score(parsed_tables({str(d): d for d in docs}), docs)
    p, r = f / max(w, 1), f / max(h, 1)
    rows = [('born-digital', 100.0, 0.0, float('nan'), p, r)]
    per_page = []
    for name in a.engines.split(','):
        eng = OCR_ENGINES[name]
        if why := eng.problem():
            print(f"{name}: skipped ({why})"); continue
        copies, recalls, cers, secs = {}, [], [], []
        for d in docs:
            out, info, missed = ocr_copy(pymupdf.open(scans[str(d)]), work/name/f"{d.stem}.pdf", mode='always',
                                         engine=name, dpi=a.ocr_dpi or a.dpi)
            for pno, why in missed.items(): print(f"{name} {d.stem} page {pno}: {why}")
            copies[str(d)] = out
            born, got = pymupdf.open(d), pymupdf.open(out)
            for i in range(born.page_count):
                t, g = born[i].get_text(), got[i].get_text()
                if not t.strip(): continue
                recalls.append(word_recall(t, g)); cers.append(cer(t, g)); secs.append(info[i + 1].seconds)
                per_page.append((name, d.stem, i + 1, recalls[-1], cers[-1], secs[-1]))
        f, h, w, nt, _, _ = score(parsed_tables(copies), docs)
        p, r = f / max(w, 1), f / max(h, 1)
        rows.append((f"{name} ({eng.describe()})", 100 * sum(recalls) / len(recalls), 100 * sum(cers) / len(cers),
                     len(secs) / sum(secs), p, r))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(f"{'engine':<60} {'word recall':>11} {'CER':>6} {'pages/s':>8} {'cells P':>8} {'cells R':>8} {'F1':>6}")
    for name, rec, c, ps, p, r in rows:
        print(f"{name[:60]:<60} {rec:>10.1f}% {c:>5.1f}% {ps:>8.2f} {p:>8.1%} {r:>8.1%} "
              f"{2 * p * r / max(p + r, 1e-9):>6.1%}")
    print('\nworst pages (word recall):')
    for name, doc, pno, rec, c, sec in sorted(per_page, key=lambda x: x[3])[:8]:
        print(f"  {name:<16} {doc} page {pno}: {rec:.1%} recall, {c:.1%} CER, {sec:.1f} s")


if __name__ == '__main__': main()
