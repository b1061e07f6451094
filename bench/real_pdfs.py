"""Issue 50: ragnb's offline tables on real PDFs nobody on this project wrote, per kind of page.

    python bench/real_pdfs.py [--kinds rotated,spans] [--data SHARED] [--json]

The documents are camelot's and pdfplumber's test PDFs (`<shared>/documents/real-pdfs/`, MIT) with the tables those
projects' tests expect (camelot's `tests/data.py` kept as `expected_tables.py.txt`; pdfplumber's NICS report as the
shared set's `derived_expected` CSV). Each page is parsed as a user would (`parse_pdf(..., offline=True)`), the HTML
tables it writes are read back, and each expected table is compared cell by cell with the table on its page that
matches it best (`bench/tables.py`: rows, then columns, aligned in order; a cell is found when the aligned cell holds the
same text, case and whitespace ignored). The scanned kind parses a scanned copy of born-digital pages (OCR, 200 dpi).

Printed per kind: expected cells, the share found, and per case the best table's rows x columns against the expected.
Pages with charts also say how many tables and pictures the page gave and how many lines of its text are numbers only
(tick values read as text); `--detectors drawings,tables` parses as ragnb does without the layout model. The built
chart pages are `bench/chart_pages.py`'s (matplotlib's vector charts beside a ruled table).
Camelot's expected values are what camelot extracts with its own settings (line breaks kept inside cells), so cells
are compared without whitespace; a case camelot only passes with hand-given columns or areas is left out.
"""
import argparse, ast, csv, json, re, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import html_grids, match_cells, filled
from icdar import norm

CAM, PLUMB = 'documents/real-pdfs/camelot', 'documents/pdfplumber'
CASES = [   # (kind, file under the shared folder, page, expected variable or CSV)
    ('rotated', f'{CAM}/clockwise_table_1.pdf', 1, 'data_lattice_table_rotated'),
    ('rotated', f'{CAM}/anticlockwise_table_1.pdf', 1, 'data_lattice_table_rotated'),
    ('rotated', f'{CAM}/clockwise_table_2.pdf', 1, 'data_stream_table_rotated'),
    ('rotated', f'{CAM}/anticlockwise_table_2.pdf', 1, 'data_stream_table_rotated'),
    ('spans', f'{CAM}/column_span_2.pdf', 1, 'data_lattice_shift_text_left_top'),
    ('spans', f'{PLUMB}/tests/pdfs/nics-background-checks-2015-11.pdf', 1,
     f'{PLUMB}/derived_expected/nics-background-checks-2015-11.table.csv'),
    ('two tables', f'{CAM}/twotables_2.pdf', 1, 'data_lattice_two_tables_1'),
    ('two tables', f'{CAM}/twotables_2.pdf', 1, 'data_lattice_two_tables_2'),
    ('background lines', f'{CAM}/background_lines_1.pdf', 1, 'data_lattice_process_background'),
    ('stream', f'{CAM}/superscript.pdf', 1, 'data_stream_flag_size'),
    ('stream', f'{CAM}/birdisland.pdf', 1, 'data_stream_duplicated_text'),
    ('stream', f'{CAM}/stream_inner_outer_columns.pdf', 1, 'data_stream_inner_outer_columns'),
    ('scanned', f'{CAM}/twotables_2.pdf', 1, 'data_lattice_two_tables_1'),
    ('scanned', f'{CAM}/twotables_2.pdf', 1, 'data_lattice_two_tables_2'),
    ('scanned', f'{CAM}/column_span_2.pdf', 1, 'data_lattice_shift_text_left_top'),
    ('charts', 'documents/icdar2013/us/us-023.pdf', 2, 'icdar'),   # a table above a chart with two axes (the human's cells)
    ('charts (built)', 'built:beside, 4 pt', 1, 'built'),   # bench/chart_pages.py
    ('charts (built)', 'built:beside, 12 pt', 1, 'built'),
    ('charts (built)', 'built:below, 4 pt', 1, 'built'),
]
CHARTS = {'charts': 1, 'charts (built)': 3}   # charts on each page of the kind: each should be a picture, none a table


def expected_tables(root:Path) -> dict:
    "camelot's expected tables by variable name (the file is Python literals; read with `ast`, never run)."
    tree = ast.parse((root/CAM/'expected_tables.py.txt').read_text())
    out = {}
    for n in tree.body:   # some variables are built from others (slices, sums): those are left out
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            try: out[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError: pass
    return out


def expected(root:Path, ref:str, tables:dict, f:str='', page:int=1) -> list[list[str]]:
    if ref == 'built':
        from chart_pages import ROWS
        return ROWS
    if ref == 'icdar':   # the human cells of the page's regions, as rows
        import pymupdf
        from icdar import truth_cells
        cells = {k: v for t in truth_cells(root/f, pymupdf.open(root/f)) if t['page'] == page for k, v in t['cells'].items()}
        n, m = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
        return [[cells.get((r, c), '') for c in range(m)] for r in range(n)]
    if ref.endswith('.csv'):   # a header of field names, then the values: the values are the table
        rows = list(csv.reader((root/ref).open()))
        return rows[1:]
    return tables[ref]


def truth(rows:list[list[str]]) -> dict:
    return {(r, c): norm(x) for r, row in enumerate(rows) for c, x in enumerate(row) if x and norm(x)}


TICKS = re.compile(r'^[\d.,:%/$€£¥+\-−–—()]+$')

def stray_numbers(markdown:str) -> int:
    "Lines of the page text made of numbers only (a chart's tick values read as text; a page number counts too)."
    return sum(1 for l in markdown.splitlines() if l.strip() and all(TICKS.match(w) for w in l.split()))


def parsed_grids(pdf:Path, page:int, scanned:bool, work:Path, detectors=None) -> tuple[list, float, int, int]:
    from ragnb.docs.pdf import parse_pdf
    if scanned:
        from ragnb.docs.ocr import scanned_copy
        pdf = scanned_copy(pdf, work/f'scan_{pdf.name}', dpi=200)
    t0 = time.perf_counter()
    kw = {'detectors': detectors} if detectors else {}
    res = parse_pdf(pdf, work/f'{pdf.stem}_{int(scanned)}', offline=True, pages=[page], **kw)
    grids = [g for h in res.pages[0].tables.values() for g in html_grids(h)]
    p = res.pages[0]
    return grids, time.perf_counter() - t0, len(p.images), stray_numbers(p.markdown)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--kinds', default='', help='comma-separated kinds (default: all)')
    ap.add_argument('--data', default=None, help='the shared data folder (default: $RAGNB_SHARED_DATA or ../shared/data)')
    ap.add_argument('--detectors', default='',
                    help="region detectors, e.g. 'drawings,tables' (as without the layout model; default: ragnb's)")
    ap.add_argument('--json', action='store_true', help='one JSON line per case instead of the table')
    a = ap.parse_args()
    from ragnb.core.samples import shared_root
    root = Path(a.data) if a.data else shared_root()
    tables, kinds = expected_tables(root), [k for k in a.kinds.split(',') if k]
    import pymupdf
    print(f"pymupdf {pymupdf.VersionBind}; {len(CASES)} expected tables", file=sys.stderr)
    by_kind, cache = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, f, page, ref in CASES:
            if kinds and kind not in kinds: continue
            key = (f, page, kind == 'scanned')
            if key not in cache:
                pdf = root/f
                if f.startswith('built:'):
                    from chart_pages import LAYOUTS, build
                    name = f.removeprefix('built:')
                    pdf = build(Path(tmp)/f"charts_{name.replace(', ', '_').replace(' ', '')}.pdf", *LAYOUTS[name])
                cache[key] = parsed_grids(pdf, page, kind == 'scanned', Path(tmp),
                                          tuple(a.detectors.split(',')) if a.detectors else None)
            grids, secs, pictures, stray = cache[key]
            want = expected(root, ref, tables, f, page)
            t = truth(want)
            best = max(grids, key=lambda g: match_cells(t, g), default=[])
            found = match_cells(t, best) if best else 0
            row = dict(kind=kind, file=Path(f).name, table=Path(ref).name, expected=len(t), found=found,
                       share=round(found / len(t), 3) if t else None, tables=len(grids),
                       best_shape=[len(best), max(map(len, best), default=0)],
                       expected_shape=[len(want), max(map(len, want), default=0)],
                       written=filled(best) if best else 0, seconds=round(secs, 2), pictures=pictures,
                       stray_numbers=stray)
            by_kind.setdefault(kind, []).append(row)
            if a.json: print(json.dumps(row))
    if a.json: return
    print(f"{'kind':<17}{'expected':>9}{'found':>7}{'share':>7}   cases (file: best table rows x cols / expected)")
    allx = allf = 0
    for kind, rows in by_kind.items():
        x, f = sum(r['expected'] for r in rows), sum(r['found'] for r in rows)
        allx += x; allf += f
        cases = '; '.join(f"{r['file'].removesuffix('.pdf')} {r['share']:.0%} ({r['best_shape'][0]}x{r['best_shape'][1]}"
                          f"/{r['expected_shape'][0]}x{r['expected_shape'][1]}"
                          + (f", {r['tables']} table(s), {r['pictures']} picture(s) for {CHARTS[kind]} chart(s), "
                             f"{r['stray_numbers']} number-only text lines"
                             if kind in CHARTS else '') + ")" for r in rows)
        print(f"{kind:<17}{x:>9}{f:>7}{f / x:>7.0%}   {cases}")
    print(f"{'all':<17}{allx:>9}{allf:>7}{allf / max(allx, 1):>7.0%}")


if __name__ == '__main__':
    main()
