"""Issue 50: real PDFs nobody on this project wrote. Pages turned sideways (by /Rotate or by text drawn along the long
side) are parsed upright, in either direction: regions, marked pages, tables and markdown."""
import re

import pymupdf
import pytest

from ragnb.core.samples import sample_path
from ragnb.docs.pdf import parse_pdf, text_turn, upright_copy

CAMELOT = sample_path('documents', 'real-pdfs', 'camelot')
KERALA = ['Kerala', '5738', '6633', '8864', '8297', '245', '2161', '3195', '1645', '2391']   # camelot's expected row


def rows(html:str) -> list[list[str]]:
    "The cell texts of each row of an HTML table (ragnb's offline tables span nothing)."
    return [[re.sub(r'<[^>]+>', '', c).strip() for c in re.findall(r'<t[dh][^>]*>(.*?)</t[dh]>', tr, re.S)]
            for tr in re.findall(r'<tr>(.*?)</tr>', html, re.S)]


@pytest.mark.parametrize('name, turn, said', [
    ('clockwise_table_1', 270, 'a quarter turn anticlockwise'),   # /Rotate 180 on text drawn bottom to top
    ('anticlockwise_table_1', 270, 'a quarter turn clockwise')])
def test_a_sideways_table_is_read_upright(name, turn, said, tmp_path):
    pdf = CAMELOT/f'{name}.pdf'
    assert text_turn(pymupdf.open(pdf), 1) == turn
    res = parse_pdf(pdf, tmp_path, offline=True)
    page = res.pages[0]
    assert any(w.startswith(said + ' to read it upright') for w in page.warnings), page.warnings
    (table,) = page.tables.values()
    got = rows(table)
    assert [c for c in next(r for r in got if r and r[0] == 'Kerala') if c] == KERALA, got
    assert [c for c in next(r for r in got if r and r[0] == 'Pooled') if c][:2] == ['Pooled', '38742'], got
    assert max(map(len, got)) == 10, got
    assert 'STATE WISE COVERAGE PARTICULARS' in page.markdown   # the title reads as words, not one letter a line
    marked = pymupdf.Pixmap(page.image)
    assert marked.width > marked.height   # the marked page is shown landscape, as the table reads


def _table(page, turn:int):
    "Three rows of three cells, drawn so that they read left to right after a turn of `turn` degrees."
    cells = [['State', 'Men', 'Women'], ['Kerala', '2161', '3195'], ['Goa', '1001', '1002']]
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            at = {0: (72 + j * 100, 100 + i * 20), 90: (100 + i * 20, 500 - j * 100), 270: (300 - i * 20, 100 + j * 100)}
            page.insert_text(at[turn], text, fontsize=11, rotate=turn)


def test_rotate_and_sideways_text_in_every_combination(tmp_path):
    doc = pymupdf.open()
    for text, rotate in [(0, 0), (90, 0), (270, 0), (0, 90), (90, 90), (90, 270), (0, 180)]:
        p = doc.new_page(width=400, height=600); _table(p, text); p.set_rotation(rotate)
    scan = doc.new_page(width=400, height=600)   # a picture and no text, shown turned by /Rotate
    pix = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 40, 60), False); pix.clear_with(200)
    scan.insert_image(scan.rect, pixmap=pix); scan.set_rotation(90)
    doc.save(tmp_path/'turns.pdf')
    res = parse_pdf(tmp_path/'turns.pdf', tmp_path/'out', offline=True, ocr='never')
    for pp in res.pages[:-1]:
        text = ' '.join(pp.markdown.split())
        assert 'State Men Women Kerala 2161 3195 Goa 1001 1002' in text, (pp.page, pp.markdown)
    notes = [pp.warnings for pp in res.pages]
    assert notes[0] == [] and 'a quarter turn clockwise' in notes[1][0] and 'a quarter turn anticlockwise' in notes[2][0]
    assert '/Rotate 90 and text runs sideways' in notes[3][0] and 'as a viewer shows it' in notes[4][0]
    assert 'a half turn' in notes[6][0] and 'upside down' in notes[6][0]
    copy = pymupdf.open(tmp_path/'out'/'upright'/'turns.pdf')
    assert [p.rotation for p in copy] == [0] * 8   # every /Rotate applied: coordinates are the shown page's
    assert (copy[7].rect.width, copy[7].rect.height) == (600, 400)   # the scan as a viewer shows it


def test_upright_pages_are_left_alone(tmp_path):
    doc = pymupdf.open(); _table(doc.new_page(width=400, height=600), 0)
    side = doc[0]; side.insert_text((380, 500), 'a label along the margin', rotate=90)   # sideways, a minority
    assert upright_copy(doc, tmp_path/'copy.pdf') == (None, {}) and not (tmp_path/'copy.pdf').exists()


NICS = sample_path('documents', 'pdfplumber', 'tests', 'pdfs', 'nics-background-checks-2015-11.pdf')


def test_a_ruled_table_follows_its_header_levels_and_leaves_title_and_notes_to_the_page(tmp_path):
    "pdfplumber's NICS report: a two-level header over 25 columns with spacer columns between rules, in a box that also holds the title and the notes."
    page = parse_pdf(NICS, tmp_path, offline=True).pages[0]
    (table,) = page.tables.values()
    head = re.findall(r'<tr>(.*?)</tr>', table, re.S)[:2]
    spans = dict((t, int(n)) for n, t in re.findall(r'<th colspan="(\d+)">([^<]+)</th>', head[0]))
    assert spans == {'Pre-Pawn': 3, 'Redemption': 3, 'Returned/Disposition': 3, 'Rentals': 2, 'Private Sale': 3,
                     'Return to Seller - Private Sale': 3}, head[0]   # one header row per level, with colspans
    got = rows(table)
    assert [len(r) for r in got[1:]] == [25] * (len(got) - 1)   # 25 columns: no column without a cell of its own
    assert got[1][0] == 'State / Territory' and got[1][-1] == 'Totals'
    states = got[2:-1]
    assert len(states) == 55 and states[0][0] == 'Alabama' and states[-1][0] == 'Wyoming'
    assert states[0][1] == '18,870' and states[0][-1] == '71,137' and states[-1][-1] == '5,017'
    num = lambda s: int(s.replace(',', '').replace(' ', '')) if s else 0   # California's figures: '98 452'
    for k in range(1, 25):   # every value sits under its header: the Totals row is the sum of the states, column by column
        assert num(got[-1][k]) == sum(num(r[k]) for r in states), (k, got[1][k])
    assert 'NICS Firearm Background Checks' not in table and 'DISCLAIMERS' not in table
    text = ' '.join(page.markdown.split())
    assert text.index('NICS Firearm Background Checks') < text.index('[table_1]') < text.index('DISCLAIMERS:')


def test_a_table_drawn_with_lines_is_read_along_them(tmp_path):
    "Rules drawn as lines (as OCR redraws a scan's rules): a header over two columns spans them, a title stays text."
    from ragnb.docs.pdf import table_cells
    doc = pymupdf.open(); p = doc.new_page(width=400, height=300)
    p.insert_text((100, 40), 'Survey of rivers', fontsize=12)   # a title above the ruled body
    xs, ys = [50, 150, 250, 350], [60, 80, 100, 120, 140]
    for y in ys: p.draw_line((xs[0], y), (xs[-1], y))
    for x in xs: p.draw_line((x, ys[0] if x != 250 else ys[1]), (x, ys[-1]))   # no rule between the two under 'Flow'
    cells = [['River', 'Flow', ''], ['', 'min', 'max'], ['Nile', '10', '30'], ['Rhine', '5', '9']]
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            if text: p.insert_text((xs[j] + (60 if (i, j) == (0, 1) else 5), ys[i] + 14), text, fontsize=10)
    page = doc[0]
    got = table_cells(page, (40, 20, 360, 150))
    assert got is not None and got.header_rows == 2
    head = [(c['col'], c['colspan'], c['text']) for c in got.cells if c['row'] == 0 and c['text']]
    assert head == [(0, 1, 'River'), (1, 2, 'Flow')], got.cells
    body = [[c['text'] for c in got.cells if c['row'] == r] for r in (2, 3)]
    assert body == [['Nile', '10', '30'], ['Rhine', '5', '9']] and got.body[1] >= 55   # the title is not in the body


# --- charts beside tables ---------------------------------------------------------------------------------------------
def _chart(kind:str) -> bytes:
    "A chart as matplotlib writes it to PDF: vector bars or lines, grid lines, tick labels as text."
    import io, matplotlib
    matplotlib.use('agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3.2, 2.2))
    if kind == 'bar': ax.bar(['2019', '2020', '2021'], [1.35, 1.42, 1.51]); ax.set_title('Iowa, per year')
    else: ax.plot(['2019', '2020', '2021'], [2.10, 2.04, 1.98], marker='o'); ax.set_title('Kansas, per year')
    ax.grid(True, axis='y'); fig.tight_layout()
    out = io.BytesIO(); fig.savefig(out, format='pdf'); plt.close(fig)
    return out.getvalue()

FARMS = [['State', '2019', '2020', '2021'], ['Iowa', '1.35', '1.42', '1.51'], ['Kansas', '2.10', '2.04', '1.98'],
         ['Ohio', '4.40', '4.38', '4.52']]

def _table_beside_charts(path, gap:float):
    "A ruled table with two charts `gap` points to its right, closer than the drawings detector's merge distance."
    doc = pymupdf.open(); page = doc.new_page(width=612, height=792)
    for r, row in enumerate(FARMS):
        for c, v in enumerate(row): page.insert_text((54 + c*60, 115 + r*22), v, fontsize=10)
    for r in range(len(FARMS) + 1): page.draw_line((50, 100 + r*22), (290, 100 + r*22), width=0.6)
    for c in range(5): page.draw_line((50 + c*60, 100), (50 + c*60, 100 + len(FARMS)*22), width=0.6)
    for k, kind in enumerate(('bar', 'line')):
        page.show_pdf_page(pymupdf.Rect(290 + gap, 90 + k*135, 480 + gap, 220 + k*135), pymupdf.open('pdf', _chart(kind)), 0)
    page.insert_text((50, 420), 'Output in million tonnes, by state and year.', fontsize=10)
    doc.save(path)
    return path

TICK_LINE = re.compile(r'^[\d.,\s]+$')

@pytest.mark.parametrize('detectors', [('drawings', 'tables'), None])   # without the layout model, and ragnb's default
def test_charts_beside_a_table_are_pictures_not_cells(detectors, tmp_path):
    "Issue 50: charts 4 pt from a ruled table are not swallowed by it; their ticks are neither cells nor page text."
    pdf = _table_beside_charts(tmp_path/'charts.pdf', gap=4)
    kw = {'detectors': detectors} if detectors else {}
    page = parse_pdf(pdf, tmp_path/'out', offline=True, **kw).pages[0]
    (table,) = page.tables.values()
    assert rows(table) == FARMS   # exactly the table: no tick value became a column or a row
    assert page.images, page.markdown   # the charts are pictures (before: lost inside the table's region)
    lines = [l for l in page.markdown.splitlines() if l.strip() and not l.startswith('<!--')]
    assert not [l for l in lines if TICK_LINE.match(l)], lines   # no '1.5', '0.5', '2019 2020 2021 0.0' lines
    alts = re.findall(r'!\[([^\]]*)\]\(', page.markdown)
    assert any(a.startswith('Chart: ') and 'Iowa, per year' in a for a in alts), alts   # the title goes with it
    assert 'Output in million tonnes, by state and year.' in page.markdown


def test_a_real_chart_below_a_table_keeps_its_title_and_loses_its_ticks(tmp_path):
    "us-023 page 2 (ICDAR-2013): a table above a two-axis chart; the chart's tick values were lines of the page text."
    page = parse_pdf(sample_path('documents', 'icdar2013', 'us', 'us-023.pdf'), tmp_path, offline=True, pages=[2]).pages[0]
    (alt,) = [a for a in re.findall(r'!\[([^\]]*)\]\(', page.markdown)]
    assert alt.startswith('Chart: ') and 'Gini index' in alt and 'Household income' in alt, alt
    for tick in ('54,000', '0.50', '49,000', '0.40'):
        assert tick not in page.markdown, tick
    assert 'FIGURE 1. Median household income' in page.markdown   # the caption outside the chart stays text
    (table,) = page.tables.values()
    assert '$49,497' in table and '0.4590' in table
