"""Cell-level accuracy of offline table parsers against the human ICDAR-2013 cells (`-str.xml`).

For every human table region, the parser's tables on the same page are compared cell by cell: rows of the two grids
are aligned in order (a monotonic alignment maximising shared cell texts), then columns likewise, and a human cell
counts as found when the parser's cell at the aligned row and column holds the same text (NFKC, case and whitespace
ignored). Each human region takes the parser table that matches it best, one to one. Recall: found / human non-empty
cells (missed tables count as zero). Precision: found / non-empty cells of every table the parser wrote on the
development set's pages (tables that match no human table count against it).

    python bench/tables.py [--methods lines,default,ragnb] [--docs eu-001,us-012] [--data SHARED]

Methods (those whose library is missing are skipped with a note):
  lines       PyMuPDF's table finder with ruling lines only: ragnb's offline parser up to pymupdf 1.x
  default     `page.find_tables()` with PyMuPDF's defaults (pymupdf >= 2: gated and completed by the layout model)
  refine      `page.find_tables(refine=True)` (pymupdf >= 2: cell grid refinement)
  pymupdf4llm `pymupdf4llm.to_json(...)` table cells (pymupdf >= 2 ships it; layout model)
  ragnb       `ragnb.docs.pdf.offline_page` on the regions of `ragnb.docs.pdf.pdf_regions`: the HTML it writes, read back
  ragnb-light the same without the layout model (regions from drawings and the rule finder only, as on pymupdf 1.x)
"""
import argparse, html.parser, inspect, json, sys, time
from collections import Counter
from pathlib import Path
import numpy as np, pymupdf
sys.path.insert(0, str(Path(__file__).resolve().parent))
from icdar import dev_docs, norm, shared_dir, truth_cells

class _Grid(html.parser.HTMLParser):
    "Rows of cell texts from HTML tables; a spanned cell's text sits at its top-left slot, None in the others."
    def __init__(self):
        super().__init__(); self.tables, self.cell = [], None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'table': self.tables.append([])
        elif tag == 'tr' and self.tables: self.tables[-1].append([])
        elif tag in ('td', 'th') and self.tables and self.tables[-1]:
            self.cell = ['', int(a.get('colspan') or 1), int(a.get('rowspan') or 1)]
        elif tag == 'br' and self.cell is not None: self.cell[0] += '\n'
    def handle_data(self, data):
        if self.cell is not None: self.cell[0] += data
    def handle_endtag(self, tag):
        if tag in ('td', 'th') and self.cell is not None:
            self.tables[-1][-1].append(tuple(self.cell)); self.cell = None

def html_grids(html:str)->list[list[list]]:
    "Every <table> in `html` as a grid (rows of texts, None where a spanning cell covers the slot)."
    p = _Grid(); p.feed(html)
    out = []
    for rows in p.tables:
        grid, taken = [], set()
        for r, row in enumerate(rows):
            c = 0; line = grid[r] if r < len(grid) else []
            if r >= len(grid): grid.append(line)
            for text, cs, rs in row:
                while (r, c) in taken: c += 1
                for dr in range(rs):
                    for dc in range(cs):
                        taken.add((r+dr, c+dc))
                        while len(grid) <= r+dr: grid.append([])
                        g = grid[r+dr]
                        while len(g) <= c+dc: g.append(None)
                        g[c+dc] = text if (dr, dc) == (0, 0) else None
                c += cs
        out.append(grid)
    return out

def _align(a:list, b:list)->dict:
    "Monotonic alignment of a and b (lists of Counters) maximising shared items; {index in a: index in b}."
    n, m = len(a), len(b)
    S = np.zeros((n+1, m+1))
    sim = np.array([[sum((x & y).values()) for y in b] for x in a]).reshape(n, m)
    for i in range(1, n+1):
        for j in range(1, m+1):
            S[i, j] = max(S[i-1, j], S[i, j-1], S[i-1, j-1] + sim[i-1, j-1])
    out, i, j = {}, n, m
    while i and j:
        if sim[i-1, j-1] > 0 and S[i, j] == S[i-1, j-1] + sim[i-1, j-1]: out[i-1] = j-1; i -= 1; j -= 1
        elif S[i, j] == S[i-1, j]: i -= 1
        else: j -= 1
    return out

def match_cells(truth:dict, grid:list[list])->int:
    "Human cells {(row, col): text} found at the aligned position of `grid` (rows of texts or None)."
    if not truth or not grid: return 0
    rows, cols = sorted({r for r, _ in truth}), sorted({c for _, c in truth})
    g = [[norm(x) if x else '' for x in row] for row in grid]
    width = max(map(len, g))
    g = [row + ['']*(width-len(row)) for row in g]
    rmap = _align([Counter(t for (r, _), t in truth.items() if r == rr) for rr in rows],
                  [Counter(x for x in row if x) for row in g])
    cmap = _align([Counter(t for (_, c), t in truth.items() if c == cc) for cc in cols],
                  [Counter(row[j] for row in g if row[j]) for j in range(width)])
    ri, ci = {r: i for i, r in enumerate(rows)}, {c: i for i, c in enumerate(cols)}
    return sum(1 for (r, c), t in truth.items()
               if ri[r] in rmap and ci[c] in cmap and g[rmap[ri[r]]][cmap[ci[c]]] == t)

def filled(grid)->int: return sum(1 for row in grid for x in row if x and norm(x))

# ---- methods: each maps (pdf path, open document) to {page: [grid, ...]} ------------------------------------------
def _finder(**kw):
    def run(path, doc):
        if hasattr(pymupdf, 'no_recommend_layout'): pymupdf.no_recommend_layout()
        out = {}
        for p in doc:
            tf = p.find_tables(**kw)
            out[p.number+1] = [t.extract() for t in (tf.tables if tf else []) if t.row_count]
        return out
    return run

def _pymupdf4llm(path, doc):
    import pymupdf4llm
    out = {}
    for pg in json.loads(pymupdf4llm.to_json(doc, use_ocr=False))['pages']:
        out[pg['page_number']] = [b['table']['extract'] for b in pg['boxes'] if b.get('boxclass') == 'table' and b.get('table')]
    return out

def _ragnb(detectors=None):
    def run(path, doc):
        from ragnb.docs.pdf import offline_page, pdf_regions
        regs = pdf_regions(path, detectors=detectors, cache=False)
        return {p.number+1: [g for h in offline_page(p, [r for r in regs if r.page == p.number+1]).tables.values() for g in html_grids(h)]
                for p in doc}
    return run

def methods()->dict:
    "The available methods: name -> (function, why it is unavailable or None)."
    from pymupdf.table import find_tables
    ft = inspect.signature(find_tables).parameters  # Page.find_tables only passes keywords on
    lines = dict(use_layout=False) if 'use_layout' in ft else {}
    try: import pymupdf4llm; p4 = None
    except Exception as e: p4 = f'pymupdf4llm not importable ({e.__class__.__name__})'
    return {'lines': (_finder(**lines), None), 'default': (_finder(), None),
            'refine': (_finder(refine=True), None if 'refine' in ft else 'needs pymupdf >= 2'),
            'pymupdf4llm': (_pymupdf4llm, p4), 'ragnb': (_ragnb(), None),
            'ragnb-light': (_ragnb(['drawings', 'tables']), None)}

def score(method, docs):
    "Found, human and written non-empty cells, tables written, and seconds, over `docs`."
    found = human = written = ntables = 0; secs = 0.
    per_doc = {}
    for path in docs:
        doc = pymupdf.open(path)
        t = time.perf_counter(); pred = method(path, doc); secs += time.perf_counter() - t
        truth = truth_cells(path, doc)
        f0 = found
        for pno in sorted({t['page'] for t in truth} | set(pred)):
            grids = [g for g in pred.get(pno, []) if filled(g)]
            ntables += len(grids); written += sum(map(filled, grids))
            regs = [t['cells'] for t in truth if t['page'] == pno]
            human += sum(map(len, regs))
            pairs = sorted(((match_cells(r, g), i, j) for i, r in enumerate(regs) for j, g in enumerate(grids)), reverse=True)
            used_r, used_g = set(), set()
            for n, i, j in pairs:
                if n and i not in used_r and j not in used_g: found += n; used_r.add(i); used_g.add(j)
        per_doc[path.stem] = found - f0
    return found, human, written, ntables, secs, per_doc

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--methods', default='lines,default,refine,pymupdf4llm,ragnb,ragnb-light')
    ap.add_argument('--docs', help='comma-separated document stems (default: all 57)')
    ap.add_argument('--data', help='shared data folder (default: ragnb.core.samples.shared_root(): $RAGNB_SHARED_DATA, else the shared folder beside the repository)')
    a = ap.parse_args()
    docs = dev_docs(shared_dir(a.data), a.docs.split(',') if a.docs else None)
    pages = sum(pymupdf.open(d).page_count for d in docs)
    print(f"pymupdf {pymupdf.VersionBind}; {len(docs)} documents, {pages} pages\n")
    print(f"{'method':<12} {'precision':>9} {'recall':>7} {'F1':>6} {'found':>6} {'human':>6} {'written':>7} {'tables':>6} {'pages/s':>8}")
    avail = methods()
    for name in a.methods.split(','):
        fn, why = avail[name]
        if why: print(f"{name:<12} skipped: {why}"); continue
        f, h, w, nt, s, _ = score(fn, docs)
        p, r = f/max(w, 1), f/max(h, 1)
        print(f"{name:<12} {p:>9.1%} {r:>7.1%} {2*p*r/max(p+r, 1e-9):>6.1%} {f:>6} {h:>6} {w:>7} {nt:>6} {pages/s:>8.2f}", flush=True)
