"Behaviour of ragnb.docs.pdf: regions, rendering, the regions command, bad input."
import argparse, hashlib, io, json, sqlite3, subprocess, sys
from contextlib import redirect_stdout
from pathlib import Path
import pymupdf, pytest
from ragnb.app.commands.documents import add_cli
from ragnb.docs.pdf import (DocumentError, Region, RegionCache, detect_regions, doc_id, find_regions, fit_zoom, has_layout,
                       icdar_tables, iou, mark_page, merge_rects, open_pdf, page_regions, pdf_regions, regions_many,
                       render_regions, table_boxes, table_grid)
from ragnb.core.samples import sample_path

DOCS = sample_path('documents')
EU = DOCS/'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu'
ICDAR = DOCS/'icdar2013'
needs_layout = pytest.mark.skipif(not has_layout(), reason='the layout model needs pymupdf-layout (pip install "ragnb[layout]")')

def run_cli(*argv):
    "Run `ragnb regions` or `ragnb parse` (ragnb.app.commands.documents); return (exit code, stdout, stderr)."
    parser = argparse.ArgumentParser(prog='ragnb'); add_cli(parser.add_subparsers())
    args = parser.parse_args([str(a) for a in argv])
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr
    with redirect_stdout(out), redirect_stderr(err): rc = args.func(args)
    return rc, out.getvalue(), err.getvalue()

def test_merge_rects_chains_and_respects_distance():
    # a chain: a-b 5 pt apart, b-c 5 pt apart, d far away; a merge can bring a box within reach of another
    got = merge_rects([[0,0,10,10],[15,0,25,10],[30,0,40,10],[200,200,230,230]], distance=10)
    assert sorted(map(tuple, got.tolist())) == [(0,0,40,10), (200,200,230,230)]
    assert len(merge_rects([[0,0,10,10],[0,20,10,30]], distance=10)) == 2  # exactly 10 apart stays apart
    assert len(merge_rects([[0,0,10,10],[0,19.9,10,30]], distance=10)) == 1
    # growth: merging a and b makes a box that reaches c, which neither a nor b reached
    got = merge_rects([[0,0,10,100],[15,0,25,10],[30,95,40,100]], distance=6)
    assert got.tolist() == [[0,0,40,100]]

def test_iou():
    assert iou((0,0,10,10), (0,0,10,10)) == 1
    assert iou((0,0,10,10), (10,0,20,10)) == 0
    assert iou((0,0,10,10), (5,0,15,10)) == pytest.approx(50/150)

def test_every_human_table_is_covered():
    for name in ('eu-001', 'eu-004'):
        doc = pymupdf.open(EU/f'{name}.pdf')
        truth = icdar_tables(EU/f'{name}-reg.xml', doc)
        assert truth
        regions = {p.number+1: page_regions(p) for p in doc}
        for pno, box in truth:
            assert max([iou(box, r) for r in regions[pno]], default=0) >= 0.5, (name, pno, box, regions[pno])

def test_seed_parameters_are_arguments():
    page = pymupdf.open(EU/'eu-004.pdf')[1]
    assert len(page_regions(page)) == 2
    assert page_regions(page, min_size=1000) == []  # nothing is bigger than the page
    # a larger merge distance joins the page's two tables (about 100 pt apart)
    assert len(page_regions(page, distance=120)) == 1

def test_control_pages():
    assert pdf_regions(DOCS/'docling/tests/data/pdf/sources/multi_page.pdf') == []
    scan = DOCS/'unstructured/example-docs/pdf/table-multi-row-column-cells.pdf'
    (r,) = pdf_regions(scan)
    page = pymupdf.open(scan)[0]
    assert iou(r.bbox, tuple(page.rect)) > 0.8  # the scan is the page

def test_regions_are_in_page_and_reading_order():
    f = DOCS/'docling/tests/data/pdf/sources/normal_4pages.pdf'
    regs = pdf_regions(f)
    doc = pymupdf.open(f)
    for r in regs:
        x0, y0, x1, y1 = r.bbox
        pr = doc[r.page-1].rect
        assert pr.x0 <= x0 < x1 <= pr.x1 and pr.y0 <= y0 < y1 <= pr.y1 and x1-x0 > 20 and y1-y0 > 20
    for pno in {r.page for r in regs}:
        on = [r for r in regs if r.page == pno]
        assert [r.index for r in on] == list(range(1, len(on)+1))
        assert [r.bbox[1] for r in on] == sorted(r.bbox[1] for r in on)

def test_render_names_are_unique_and_stable(tmp_path):
    a, b = EU/'eu-004.pdf', EU/'eu-001.pdf'
    ra = render_regions(a, pdf_regions(a, [2]), tmp_path)
    rb = render_regions(b, pdf_regions(b, [1]), tmp_path)
    names = [Path(r.image).name for r in ra+rb]
    assert len(set(names)) == len(names)  # two documents in one folder never collide
    assert all(n.startswith(doc_id(a)) for n in names[:len(ra)])
    again = render_regions(a, pdf_regions(a, [2]), tmp_path/'again')
    assert [Path(r.image).name for r in again] == names[:len(ra)]  # stable
    pix = pymupdf.Pixmap(ra[0].image)
    x0, y0, x1, y1 = ra[0].bbox
    assert abs(pix.width - 4*(x1-x0)) <= 2 and abs(pix.height - 4*((y1+50)-(y0-35))) <= 2  # zoom 4, margins
    assert 'page 2, region 1' in ra[0]._repr_html_() and 'base64' in ra[0]._repr_html_()

def test_marked_page_has_red_boxes(tmp_path):
    f = EU/'eu-004.pdf'
    regs = pdf_regions(f, [2])
    png = mark_page(f, 2, regs, tmp_path)
    assert png.name == f'{doc_id(f)}_2.png'
    pix = pymupdf.Pixmap(str(png))
    z = fit_zoom(pymupdf.open(f)[1].rect, 3)  # zoom 3, lowered to fit 2,048 pixels
    assert pix.height == 2048
    for r in regs:
        x0, y0, x1, y1 = (round(z*v) for v in r.bbox)
        edge = [pix.pixel(x, (y0+y1)//2) for x in range(x0-3, x0+4)]
        assert any(c[0] > 200 and c[1] < 80 and c[2] < 80 for c in edge)
    plain = pymupdf.open(f)[1].get_pixmap(matrix=pymupdf.Matrix(3, 3))
    x0, y0, x1, y1 = (round(3*v) for v in regs[0].bbox)
    assert not any(c[0] > 200 and c[1] < 80 and c[2] < 80 for c in (plain.pixel(x, (y0+y1)//2) for x in range(x0-3, x0+4)))

def test_regions_cli_json(tmp_path):
    rc, out, _ = run_cli('regions', EU/'eu-004.pdf', '--json', '--pages', '2,3', '--render', tmp_path)
    assert rc == 0
    rows = json.loads(out)
    assert [(r['page'], r['index']) for r in rows] == [(2, 1), (2, 2), (3, 1)]
    for r in rows:
        assert set(r) == {'page', 'index', 'bbox', 'kind', 'source', 'image'} and len(r['bbox']) == 4
        assert r['kind'] == 'table' and {'drawings', 'tables'} <= set(r['source'])  # ruled tables
        assert Path(r['image']).exists()
    assert (tmp_path/f'{doc_id(EU/"eu-004.pdf")}_2.png').exists()  # marked page
    rc, out, _ = run_cli('regions', EU/'eu-004.pdf', '--json', '--pages', '2')
    assert all(r['image'] is None for r in json.loads(out))

def test_bad_pdfs_name_the_file(tmp_path):
    empty = tmp_path/'empty.pdf'; empty.write_bytes(b'')
    corrupt = tmp_path/'corrupt.pdf'; corrupt.write_bytes(b'%PDF-1.7\n' + b'\x00garbage' * 50)
    notpdf = tmp_path/'notes.pdf'; notpdf.write_text('just some text, not a PDF')
    enc = tmp_path/'secret.pdf'
    doc = pymupdf.open(); doc.new_page().insert_text((72, 72), 'secret')
    doc.save(enc, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw='pw', owner_pw='pw')
    for f, why in [(empty, 'empty'), (corrupt, 'not a readable PDF'), (notpdf, 'not a readable PDF'),
                   (enc, 'encrypted'), (tmp_path/'missing.pdf', 'no such file')]:
        with pytest.raises(DocumentError, match=why) as e: open_pdf(f)
        assert str(f) in str(e.value)
    rc, out, err = run_cli('regions', enc, '--json')
    assert rc == 2 and str(enc) in err and 'encrypted' in err and out == ''

# ---- parsing -------------------------------------------------------------------------------------------------
from ragnb.core.llm import LLM, Retries
from ragnb.docs.pdf import OFFLINE_MARK, ParsedPage, parse_pdf, read_page_reply, sanitize_html
from ragnb.testing.scripted import ScriptedServer

def test_sanitize_html_keeps_tables_only():
    dirty = ('<table onclick="x()" style="color:red"><tr><th onmouseover="y()" colspan="2">A</th></tr>'
             '<tr><td rowspan="2"><a href="javascript:z()">b</a><img src=x onerror="w()"></td></tr></table>'
             '<script>alert(1)</script><iframe src="http://evil"></iframe>')
    clean = sanitize_html(dirty)
    for bad in ('onclick', 'onmouseover', 'onerror', 'script', 'javascript', 'iframe', 'style', '<img', '<a '):
        assert bad not in clean, bad
    assert 'colspan="2"' in clean and 'rowspan="2"' in clean and '>b<' in clean

def test_read_page_reply_extracts_tables_and_images():
    reply = ("```markdown\n# Title\n\nText <script>bad()</script> here.\n\n```html\n<table><tr><td>1</td></tr></table>\n```\n\n"
             "<table><tr><td onclick='x'>2</td></tr></table>\n\n![fig](1_2.png) ![](made_up.png) ![](d_1_3.png)\n```")
    md, tables, images, warnings = read_page_reply(reply, ['d_1_1.png', 'd_1_2.png', 'd_1_3.png'], first_table=4)
    assert list(tables) == ['table_4', 'table_5']
    assert '[table_4](table_4.html)' in md and '[table_5](table_5.html)' in md and '<table' not in md
    assert 'onclick' not in tables['table_5'] and '<script' not in md and not md.startswith('```')
    assert images == ['d_1_2.png', 'd_1_3.png'] and '![fig](d_1_2.png)' in md
    assert len(warnings) == 1 and 'made_up.png' in warnings[0]
    segs = ParsedPage(1, md, tables, {i: i for i in images}).segments()
    assert [s.name for s in segs if s.kind != 'text'] == ['table_4', 'table_5', 'd_1_2.png', 'd_1_3.png']

def test_offline_parse_writes_folder(tmp_path):
    f = EU/'eu-004.pdf'
    res = parse_pdf(f, tmp_path, offline=True, pages=[2, 3, 5], page_zoom=1, crop_zoom=1)
    assert res.mode == 'offline' and res.failures == []
    m = json.loads((tmp_path/'manifest.json').read_text())
    assert m['mode'] == 'offline' and 'no model' in m['note'] and [p['page'] for p in m['pages']] == [2, 3, 5]
    assert [p['tables'] for p in m['pages']] == [['table_1.html', 'table_2.html'], ['table_3.html'], []]
    t1 = (tmp_path/'table_1.html').read_text()
    assert 'Germany' in t1 and '415.3' in t1  # a cell of Table 6.1
    md2 = (tmp_path/'page_2.md').read_text()
    assert md2.startswith(OFFLINE_MARK) and '[table_1](table_1.html)' in md2 and 'Germany' not in md2
    assert (tmp_path/f'{doc_id(f)}_2.png').exists() and (tmp_path/f'{doc_id(f)}_2_1.png').exists()
    with pytest.raises(DocumentError, match='another document'):
        parse_pdf(EU/'eu-001.pdf', tmp_path, offline=True)
    assert json.loads((tmp_path/'manifest.json').read_text())['doc'] == doc_id(f)  # untouched

def test_offline_reading_order_two_columns(tmp_path):
    res = parse_pdf(DOCS/'docling/tests/data/pdf/sources/amt_handbook_sample.pdf', tmp_path, offline=True, page_zoom=0.5, crop_zoom=0.5)
    md = res.pages[0].markdown
    left_last, right_first = md.find('The spring, through the medium'), md.find('the most common ranges in size')
    assert 0 < md.find('pulleys, provided') < md.find('The two general types') < left_last < right_first < md.find('Elastic Stop Nut')

def test_offline_parse_scanned_and_text_only(tmp_path):
    f = DOCS/'unstructured/example-docs/pdf/table-multi-row-column-cells.pdf'   # a real scan: a picture of a table
    scan = parse_pdf(f, tmp_path/'s', offline=True, ocr='never')
    (p,) = scan.pages
    assert 'no text layer' in p.warnings[0] and [s.kind for s in p.segments()] == ['image']
    from ragnb.docs.ocr import choose_engine, OcrUnavailable
    try: choose_engine()
    except OcrUnavailable: pass   # tests/test_ocr.py covers the page without an engine
    else:
        (p,) = parse_pdf(f, tmp_path/'o', offline=True).pages   # ocr='auto': read by OCR
        assert p.ocr['reason'] == 'scanned' and not p.warnings
        text = ' '.join(s.content for s in p.segments())
        assert 'Low Vision' in text and '1716 sec, n=3' in text
    text = parse_pdf(DOCS/'docling/tests/data/pdf/sources/multi_page.pdf', tmp_path/'t', offline=True, pages=[1])
    assert all(s.kind == 'text' for s in text.pages[0].segments()) and len(text.pages[0].markdown) > 500

def test_vision_parse_through_test_server(tmp_path):
    f = EU/'eu-004.pdf'
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite', progress=False)
        res = parse_pdf(f, tmp_path/'out', llm=llm, pages=[2, 3], page_zoom=1, crop_zoom=1)
        calls = srv.calls('pdf_page')
    assert res.failures == [] and res.mode == 'vision' and len(calls) == 2
    content = next(c for c in calls if '_2_1.png' in c['body']['messages'][-1]['content'][0]['text'])['body']['messages'][-1]['content']  # any order
    assert content[1]['image_url']['url'].startswith('data:image/png;base64,')
    assert f'{doc_id(f)}_2_1.png' in content[0]['text'] and f'{doc_id(f)}_2_2.png' in content[0]['text']
    m = json.loads((tmp_path/'out'/'manifest.json').read_text())
    assert m['mode'] == 'vision' and m['prompt'].startswith('pdf_page@')
    assert [p['tables'] for p in m['pages']] == [['table_1.html'], ['table_2.html']]  # numbered through the document
    assert m['pages'][0]['images'] == [f'{doc_id(f)}_2_2.png']
    assert '<table' not in (tmp_path/'out'/'page_2.md').read_text()

def test_failed_pages_are_recorded_and_the_rest_continues(tmp_path):
    f = EU/'eu-004.pdf'
    with ScriptedServer(faults={'500': 0.5}, seed=3) as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache=False, retries=Retries(max_retries=0), progress=False)
        res = parse_pdf(f, tmp_path, llm=llm, pages=[2, 3, 4, 6, 7, 8], page_zoom=0.5, crop_zoom=0.5)
    failed = [p.page for p in res.pages if p.failure is not None]
    assert 0 < len(failed) < 6, failed
    m = json.loads((tmp_path/'manifest.json').read_text())
    assert [x['page'] for x in m['failures']] == failed and all(x['kind'] == 'server_error' for x in m['failures'])
    for p in m['pages']:
        assert (tmp_path/f"page_{p['page']}.md").exists() == (p['page'] not in failed)
    assert 'failed' in res._repr_markdown_()

def test_parse_cli(tmp_path):
    rc, out, err = run_cli('parse', EU/'eu-004.pdf', '--out', tmp_path, '--offline', '--pages', '2')
    assert rc == 0 and '1/1 pages' in out
    assert (tmp_path/'page_2.md').exists() and (tmp_path/'table_2.html').exists()
    rc, out, err = run_cli('parse', tmp_path/'missing.pdf', '--out', tmp_path/'x', '--offline')
    assert rc == 2 and 'missing.pdf' in err

# ---- tables without rules, kinds and sources, workers, cache ---------------------------------------------------
ROWS = [('Region', 'Q1', 'Q2', 'Q3', 'Q4'), ('North', '412.5', '430.1', '455.0', '470.2'), ('South', '388.0', '391.7', '402.3', '415.9'),
        ('East', '290.4', '301.2', '310.8', '322.6'), ('West', '505.1', '512.9', '530.4', '548.0'),
        ('Centre', '350.6', '362.3', '371.1', '380.7'), ('Islands', '120.9', '125.4', '131.0', '136.2')]

def borderless_page(doc):
    "A page with a heading, prose and a table whose columns are aligned by whitespace only (no drawing at all)."
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), 'Quarterly retail sales by region', fontsize=14, fontname='hebo')
    page.insert_textbox(pymupdf.Rect(72, 100, 523, 160), 'Retail sales grew in every region during the year. The table '
                        'below lists the sales of each region by quarter, in millions of euros.', fontsize=10)
    for i, row in enumerate(ROWS):
        for x, cell in zip([72, 200, 280, 360, 440], row):
            page.insert_text((x, 190 + 16*i), cell, fontsize=10, fontname='hebo' if i == 0 else 'helv')
    page.insert_textbox(pymupdf.Rect(72, 310, 523, 380), 'Sales rose fastest in the West and slowest in the South. ' * 3, fontsize=10)
    return page

def ruled_page(doc):
    "A page with a table drawn with rules around every cell, and a picture below it."
    page = doc.new_page(width=595, height=842)
    x0, y0, w, h = 72, 100, 90, 20
    for i, row in enumerate(ROWS):
        for j, cell in enumerate(row):
            page.draw_rect(pymupdf.Rect(x0 + j*w, y0 + i*h, x0 + (j+1)*w, y0 + (i+1)*h), color=(0, 0, 0), width=0.7)
            page.insert_text((x0 + j*w + 4, y0 + i*h + 14), cell, fontsize=10)
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 120, 90), 0)
    pix.set_rect(pix.irect, (40, 120, 200))
    page.insert_image(pymupdf.Rect(150, 400, 450, 625), pixmap=pix)
    return page

def text_box(page, first='Region', last='136.2'):
    "The box of the generated table's text, from its first cell to its last."
    words = page.get_text('words')
    a = next(w for w in words if w[4] == first); b = next(w for w in words if w[4] == last)
    return (a[0], a[1], b[2], b[3])

def inside(t, r):
    ix, iy = max(0, min(t[2], r[2])-max(t[0], r[0])), max(0, min(t[3], r[3])-max(t[1], r[1]))
    return ix*iy/((t[2]-t[0])*(t[3]-t[1]))

@pytest.fixture
def sample_pdf(tmp_path):
    "Three pages: a borderless table, a ruled table with a picture, and prose only."
    doc = pymupdf.open()
    borderless_page(doc); ruled_page(doc)
    doc.new_page(width=595, height=842).insert_textbox(pymupdf.Rect(72, 72, 523, 400), 'Plain prose without tables. ' * 40, fontsize=11)
    doc.save(tmp_path/'sample.pdf')
    return tmp_path/'sample.pdf'

@needs_layout
def test_borderless_table_is_found(sample_pdf):
    page = open_pdf(sample_pdf)[0]
    truth = text_box(page)
    assert page_regions(page) == [] and table_boxes(page) == []  # no drawings, no rules: the old detectors see nothing
    (r,) = detect_regions(page)
    assert r['kind'] == 'table' and 'layout' in r['source']
    assert inside(truth, r['bbox']) >= 0.9 and iou(truth, r['bbox']) >= 0.5, (truth, r)

@needs_layout
def test_borderless_tables_on_a_real_page():
    path = ICDAR/'us/us-033.pdf'  # page 2: two whitespace-aligned tables (Age Group / Proportion)
    doc = open_pdf(path)
    human = [bb for pno, bb in icdar_tables(ICDAR/'us/us-033-reg.xml', doc) if pno == 2]
    assert page_regions(doc[1]) == [] and table_boxes(doc[1]) == []
    found = [r for r in pdf_regions(path, [2], cache=False) if r.kind == 'table']
    assert len(found) == len(human) == 2
    for h in human: assert max(iou(h, r.bbox) for r in found) > 0.9  # the header rows included
    assert [table_grid(doc[1], r.bbox)[:2] for r in found] == [[['Age Group', 'Proportion'], ['20-29', v]] for v in ('0.2650', '0.2834')]

def test_kinds_and_sources(sample_pdf):
    page = open_pdf(sample_pdf)[1]
    regions = detect_regions(page)
    table = next(r for r in regions if r['kind'] == 'table')
    assert {'drawings', 'tables'} <= set(table['source']) and inside(text_box(page), table['bbox']) >= 0.9
    figure = next(r for r in regions if r['kind'] == 'figure')
    assert 'drawings' in figure['source'] and iou(figure['bbox'], (150, 400, 450, 625)) > 0.9
    assert all(r['kind'] in ('table', 'figure', 'drawing') and r['source'] for r in regions)
    assert set(table['source']) == ({'drawings', 'tables', 'layout'} if has_layout() else {'drawings', 'tables'})
    only_tables = detect_regions(page, ['tables'])
    assert [(r['kind'], r['source']) for r in only_tables] == [('table', ('tables',))]
    seed = detect_regions(page, ['drawings'], decorations=True)  # the seed's method alone, as it was
    assert [r['bbox'] for r in seed] == page_regions(page)
    with pytest.raises(ValueError, match='rules'): detect_regions(page, ['rules'])
    regs = pdf_regions(sample_pdf, [2], cache=False)
    assert [(r.kind, r.source) for r in regs] == [(r['kind'], r['source']) for r in regions]
    d = regs[0].to_dict()
    assert d['kind'] == regs[0].kind and d['source'] == list(regs[0].source) and json.loads(json.dumps(d)) == d

def test_workers_give_the_same_regions(sample_pdf, tmp_path):
    one = pdf_regions(sample_pdf, cache=False)
    two = find_regions(sample_pdf, cache=False, workers=2)
    assert one == two and {r.page for r in one} >= {2}
    cache = tmp_path/'regions.sqlite'  # workers detect, this process writes the cache: a second run reads it back
    assert regions_many([sample_pdf], workers=2, cache=cache)[str(sample_pdf)] == one
    sha = hashlib.sha256(sample_pdf.read_bytes()).hexdigest()
    with sqlite3.connect(cache) as db: assert {p for (p,) in db.execute('SELECT page FROM regions WHERE sha=?', (sha,))} == {1, 2, 3}

def test_a_failing_page_names_the_file_and_page(sample_pdf):
    with pytest.raises(DocumentError, match=r'sample\.pdf: page 2: region detection failed'):
        pdf_regions(sample_pdf, [2], cache=False, distance='far')  # a bad option reaches the drawings detector

def test_cache_is_keyed_by_content_page_and_settings(sample_pdf, tmp_path):
    cache = tmp_path/'regions.sqlite'
    first = pdf_regions(sample_pdf, cache=cache)
    assert first == pdf_regions(sample_pdf, cache=False)
    # what is stored is what is read back: mark the stored page 2 and ask again
    sha = hashlib.sha256(sample_pdf.read_bytes()).hexdigest()
    with sqlite3.connect(cache) as db:
        (settings, found), = db.execute('SELECT settings, found FROM regions WHERE sha=? AND page=2', (sha,)).fetchall()
        rows = json.loads(found); rows[0]['kind'] = 'drawing'
        db.execute('UPDATE regions SET found=? WHERE sha=? AND page=2', (json.dumps(rows), sha))
    again = pdf_regions(sample_pdf, cache=cache)
    assert [r.kind for r in again if r.page == 2][0] == 'drawing'  # a cache hit: nothing recomputed
    assert pdf_regions(sample_pdf, [2], cache=cache, detectors=['tables'])[0].source == ('tables',)  # other settings
    copy = tmp_path/'copy.pdf'; copy.write_bytes(sample_pdf.read_bytes() + b'\n%changed\n')
    assert pdf_regions(copy, [2], cache=cache)[0].kind == 'table'  # other content: found afresh
    assert RegionCache(cache).get(sha, [1, 2, 3], settings).keys() == {1, 2, 3}

def test_regions_cli_contract(sample_pdf):
    rc, out, _ = run_cli('regions', sample_pdf, '--json', '--no-cache')
    rows = json.loads(out)
    assert rc == 0 and rows and all(set(r) == {'page', 'index', 'bbox', 'kind', 'source', 'image'} for r in rows)
    rc, out, _ = run_cli('regions', sample_pdf, '--json', '--kind', 'figure', '--no-cache')
    assert [r['kind'] for r in json.loads(out)] == ['figure']
    rc, out, _ = run_cli('regions', sample_pdf, '--json', '--seed', '--pages', '2', '--no-cache')
    assert [r['bbox'] for r in json.loads(out)] == [list(b) for b in page_regions(open_pdf(sample_pdf)[1])]
    rc, _, err = run_cli('regions', sample_pdf, '--kind', 'chart')
    assert rc == 2 and 'chart' in err
    parser = argparse.ArgumentParser(prog='ragnb'); add_cli(parser.add_subparsers())
    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit): parser.parse_args(['regions', '--help'])
    text = ' '.join(buf.getvalue().split())
    for claim in ('PDF points', 'TOP-LEFT', 'counted from 1', 'kind', '"table", "figure" or "drawing"', 'source', '"layout"'):
        assert claim in text, claim


def test_snap_to_words_takes_in_the_words_a_box_cuts():
    from ragnb.docs.pdf import snap_to_words
    words = [(10, 10, 50, 20, 'Age'), (60, 10, 120, 20, 'Proportion'),   # a header row half inside the box
             (10, 30, 40, 40, '20-29'), (200, 30, 260, 40, 'caption')]   # a word barely touched stays out
    assert snap_to_words((12, 14, 118, 45), words) == (10, 10, 120, 45)
    assert snap_to_words((12, 14, 205, 45), words) == (10, 10, 205, 45)   # 'caption' is under half inside
    assert snap_to_words((0, 0, 300, 50), words) == (0, 0, 300, 50)      # nothing cut: unchanged


def test_line_end_hyphens_are_joined_only_into_words_the_document_has(tmp_path):
    "Issue 50: 'adip-' + 'iscing' becomes 'adipiscing' where the document has the word; a real hyphen stays."
    import pymupdf
    from ragnb.docs.pdf import parse_pdf
    doc = pymupdf.open(); p = doc.new_page()
    p.insert_text((72, 80), 'Lorem ipsum dolor sit amet, adipiscing elit, sed do eiusmod.', fontsize=10)
    p.insert_text((72, 130), 'Lorem ipsum dolor sit amet, consectetur adip-', fontsize=10)
    p.insert_text((72, 142), 'iscing elit, with a state-', fontsize=10)
    p.insert_text((72, 154), 'of-the-art parser and a co-', fontsize=10)
    p.insert_text((72, 166), 'author of it.', fontsize=10)
    doc.save(tmp_path/'h.pdf')
    md = parse_pdf(tmp_path/'h.pdf', tmp_path/'out', offline=True).pages[0].markdown
    assert 'consectetur adipiscing elit' in md and 'adip- iscing' not in md, md
    assert 'state- of-the-art' in md and 'co- author' in md, md   # "stateof" and "coauthor" are not in the document


def _three_columns(path):
    "A notice set in three columns under a title across the page, paragraphs level with each other across the columns."
    doc = pymupdf.open(); page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(50, 40, 562, 80), 'Notice of proposed rulemaking: the three columns', fontsize=14)
    words = {1: 'alpha', 2: 'bravo', 3: 'charlie'}
    for col in (1, 2, 3):
        x0 = 50 + (col - 1) * 176
        for par in (1, 2, 3):
            text = f"Column {col} paragraph {par} begins. " + ' '.join([words[col]] * 24) + f" Column {col} paragraph {par} ends."
            page.insert_textbox(pymupdf.Rect(x0, 90 + (par - 1) * 130, x0 + 160, 90 + par * 130 - 10), text, fontsize=9)
    doc.save(path)
    return path

def test_three_columns_read_column_by_column(tmp_path):
    "Issue 50: a page of three columns reads down each column in turn, not across the page paragraph by paragraph."
    md = parse_pdf(_three_columns(tmp_path/'notice.pdf'), tmp_path/'out', offline=True).pages[0].markdown
    marks = [f"Column {c} paragraph {p} begins" for c in (1, 2, 3) for p in (1, 2, 3)]
    at = [md.find(m) for m in marks]
    assert all(a >= 0 for a in at) and at == sorted(at), list(zip(marks, at))
    assert md.find('Notice of proposed rulemaking') < at[0]


def test_a_cell_of_two_lines_beside_a_cell_of_one_reads_line_by_line(tmp_path):
    from ragnb.docs.pdf import table_cells
    doc = pymupdf.open(); page = doc.new_page(width=400, height=300)
    xs, ys = [50, 150, 300, 350], [90, 125, 145, 165]
    for x in xs: page.draw_line((x, ys[0]), (x, ys[-1]), width=0.5)
    for y in ys: page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
    page.insert_text((55, 111), 'Item', fontsize=10)   # one line, level with the gap between the other cell's two
    page.insert_text((155, 105), 'Cost on', fontsize=10)
    page.insert_text((155, 117), 'U.S. operators', fontsize=10)
    page.insert_text((305, 111), 'Year', fontsize=10)
    for y, row in ((138, ('Tanker', '1,200', '2019')), (158, ('Barge', '85', '2020'))):
        for x, v in zip((55, 155, 305), row): page.insert_text((x, y), v, fontsize=10)
    t = table_cells(page, (45, 85, 355, 170))
    head = [c['text'] for c in t.cells if c['row'] == 0]
    assert head == ['Item', 'Cost on U.S. operators', 'Year'], head   # once 'Cost U.S. on operators'
    assert [c['text'] for c in t.cells if c['row'] == 1] == ['Tanker', '1,200', '2019']


def _ruled(page, xs, ys, x_from=None):
    for x in xs: page.draw_line((x, (x_from or {}).get(x, ys[0])), (x, ys[-1]), width=0.5)
    for y in ys: page.draw_line((xs[0], y), (xs[-1], y), width=0.5)


def test_a_ruled_tables_rows_follow_its_rules_and_a_spanning_header_stays_above():
    from ragnb.docs.pdf import table_cells
    doc = pymupdf.open(); page = doc.new_page(width=400, height=400)
    xs = [50, 150, 230, 310, 390]
    # header: 'Literacy status' over the last three columns with no rule under it; its own rules start below it
    _ruled(page, xs, [60, 100, 130, 160, 190], x_from={230: 80, 310: 80})
    put = lambda x, y, t: page.insert_text((x, y), t, fontsize=9)
    put(55, 84, 'State'); put(160, 72, 'Literacy status'); put(160, 94, 'None'); put(235, 94, 'School')
    put(315, 94, 'College')
    put(55, 112, 'Knowledge and'); put(55, 123, 'practices of HTN'); put(160, 118, '2400'); put(235, 118, '7.2')
    put(315, 118, '5.5')
    for y, row in ((148, ('Kerala', '2399', '21.4', '6.2')), (178, ('Orissa', '2405', '33.2', '8.5'))):
        for x, t in zip((55, 160, 235, 315), row): put(x, y, t)
    t = table_cells(page, (45, 55, 395, 195))
    rows = {}
    for c in t.cells: rows.setdefault(c['row'], []).append(c['text'])
    # the two lines of one ruled cell are one row (before: two rows, the values beside the first or the second)
    assert ['Knowledge and practices of HTN', '2400', '7.2', '5.5'] in rows.values(), rows
    assert ['Kerala', '2399', '21.4', '6.2'] in rows.values() and len(rows) == 5, rows
    # the header over three columns, with no rule under it, is a row of its own above them (before: left out)
    assert rows[0] == ['', 'Literacy status'] and rows[1] == ['State', 'None', 'School', 'College'], rows
    assert [c['colspan'] for c in t.cells if c['row'] == 0] == [1, 3] and t.header_rows == 2


def test_a_table_ruled_only_above_and_below_keeps_a_row_per_line():
    from ragnb.docs.pdf import table_cells
    doc = pymupdf.open(); page = doc.new_page(width=400, height=300)
    xs = [50, 150, 250, 350]
    for x in xs: page.draw_line((x, 60), (x, 160), width=0.5)
    for y in (60, 80, 160): page.draw_line((50, y), (350, y), width=0.5)   # a rule under the header only
    for i, row in enumerate((('Name', 'Year', 'Value'), ('Alpha', '2019', '12'), ('Beta', '2020', '15'),
                             ('Gamma', '2021', '18'), ('Delta', '2022', '21'))):
        for x, v in zip((55, 155, 255), row): page.insert_text((x, 74 + 20 * i), v, fontsize=9)
    t = table_cells(page, (45, 55, 355, 165))
    assert max(c['row'] for c in t.cells) == 4   # five rows: no rule between lines is no reason to join them here


def test_a_ruled_row_of_many_wrapped_lines_is_one_row():
    from ragnb.docs.pdf import table_cells
    doc = pymupdf.open(); page = doc.new_page(width=400, height=400)
    ys = [60, 80, 140, 200, 260]
    _ruled(page, [50, 150, 380], ys)
    page.insert_text((55, 74), 'Property', fontsize=9); page.insert_text((155, 74), 'Reason for change', fontsize=9)
    for top, label in zip(ys[1:], ('Clarity', 'Range', 'Recall')):
        page.insert_text((55, top + 14), label, fontsize=9)
        for k, t in enumerate(('- reported as unclear', 'by patients', '- many questions', 'left blank')):
            page.insert_text((155, top + 14 + 12 * k), f"{t} ({label})", fontsize=9)
    t = table_cells(page, (45, 55, 385, 265))
    rows = {}
    for c in t.cells: rows.setdefault(c['row'], []).append(c['text'])
    # 4 lines a row and a rule every 4 lines: fewer than 40% of the gaps ruled, yet each row's wrapped lines are one row
    assert len(rows) == 4, rows
    assert rows[1] == ['Clarity', '- reported as unclear (Clarity) by patients (Clarity) - many questions (Clarity) '
                                  'left blank (Clarity)'], rows
