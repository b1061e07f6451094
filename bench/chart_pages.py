"""Pages with a ruled table beside charts, built for bench/real_pdfs.py's "charts (built)" kind (issue 50).

The charts are matplotlib's own vector PDF output (bars and lines with grid lines, tick labels as text), placed on the
page with PyMuPDF, as a report tool would: beside the table 4 pt away, 12 pt away, and in a row below it. Nobody on
the project drew these charts by hand; the table's values are the truth.
"""
import io
from pathlib import Path

ROWS = [['State', '2019', '2020', '2021'], ['Iowa', '1.35', '1.42', '1.51'], ['Kansas', '2.10', '2.04', '1.98'],
        ['Nebraska', '0.87', '0.91', '0.95'], ['Missouri', '3.02', '3.11', '3.25'], ['Ohio', '4.40', '4.38', '4.52']]
LAYOUTS = {'beside, 4 pt': (4, False), 'beside, 12 pt': (12, False), 'below, 4 pt': (4, True)}


def chart(kind:str) -> bytes:
    "One chart as a one-page vector PDF."
    import matplotlib
    matplotlib.use('agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3.2, 2.2))
    years = ROWS[0][1:]
    if kind == 'bar': ax.bar(years, [float(v) for v in ROWS[1][1:]]); ax.set_title('Iowa, per year')
    elif kind == 'line': ax.plot(years, [float(v) for v in ROWS[2][1:]], marker='o'); ax.set_title('Kansas, per year')
    else: ax.barh([r[0] for r in ROWS[1:]], [float(r[3]) for r in ROWS[1:]]); ax.set_title('2021 by state')
    ax.grid(True, axis='y'); fig.tight_layout()
    out = io.BytesIO(); fig.savefig(out, format='pdf'); plt.close(fig)
    return out.getvalue()


def build(path:Path, gap:float, below:bool) -> Path:
    "A page with the ruled table at the top left and three charts `gap` points from it, beside it or below it."
    import pymupdf
    doc = pymupdf.open(); page = doc.new_page(width=612, height=792)
    page.insert_text((50, 60), 'Farm output by state (million tonnes)', fontsize=16)
    x0, y0, cw, rh = 50, 100, 60, 22
    for r, row in enumerate(ROWS):
        for c, v in enumerate(row): page.insert_text((x0 + c*cw + 4, y0 + r*rh + 15), v, fontsize=10)
    for r in range(len(ROWS) + 1): page.draw_line((x0, y0 + r*rh), (x0 + 4*cw, y0 + r*rh), width=0.6)
    for c in range(5): page.draw_line((x0 + c*cw, y0), (x0 + c*cw, y0 + len(ROWS)*rh), width=0.6)
    bottom = y0 + len(ROWS)*rh
    for k, kind in enumerate(('bar', 'line', 'barh')):
        if below: rect = pymupdf.Rect(50 + k*175, bottom + gap, 50 + k*175 + 170, bottom + gap + 120)
        else: rect = pymupdf.Rect(x0 + 4*cw + gap, 90 + k*135, x0 + 4*cw + gap + 190, 90 + k*135 + 130)
        page.show_pdf_page(rect, pymupdf.open('pdf', chart(kind)), 0)
    doc.save(path)
    return path
