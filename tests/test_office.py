"Behaviour of ragnb.docs.office: DOCX/PPTX segments, fidelity against docling's ground truth, bad input."
import argparse, io, json, zipfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
import pytest
from ragnb.docs.office import (docling_grids, docx_cells, docx_segments, grid_html, open_docx, open_pptx,
                          parse_office, pptx_cells, pptx_segments)
from ragnb.docs.pages import DocumentError, expand, sanitize_html
from ragnb.app.commands.documents import add_cli
from ragnb.core.samples import sample_path

DOCS = sample_path('documents')
DL = DOCS/'docling/tests/data'

def test_grid_html_and_expand_agree():
    cells = [dict(row=0, col=0, rowspan=1, colspan=2, text='a & b'), dict(row=1, col=0, rowspan=2, colspan=1, text='c'),
             dict(row=1, col=1, rowspan=1, colspan=1, text='d'), dict(row=2, col=1, rowspan=1, colspan=1, text='<e>')]
    assert expand(cells) == [['a & b', 'a & b'], ['c', 'd'], ['c', '<e>']]
    html = grid_html(cells)
    assert '<th colspan="2">a &amp; b</th>' in html and '<td rowspan="2">c</td>' in html and '&lt;e&gt;' in html
    assert sanitize_html(html).count('<td') == 3  # our own HTML survives sanitising

def test_docx_tables_match_docling_cell_for_cell():
    truth = docling_grids(DL/'docx/groundtruth/word_tables.docx.json')
    ours = [expand(docx_cells(t)) for t in open_docx(DL/'docx/sources/word_tables.docx').tables]
    assert len(truth) == 7 and ours == truth

def test_rich_cells_nested_tables_match_docling():
    from ragnb.docs.office import docx_tables
    strip = lambda g: [[c.strip() for c in row] for row in g]
    truth = [strip(g) for g in docling_grids(DL/'docx/groundtruth/docx_rich_cells.docx.json')]
    ours = [strip(expand(docx_cells(t))) for t in docx_tables(open_docx(DL/'docx/sources/docx_rich_cells.docx'))]
    assert len(truth) == 9 and ours == truth
    segs = docx_segments(DL/'docx/sources/docx_rich_cells.docx')
    assert sum(s.kind == 'table' for s in segs) == 9 and sum(s.kind == 'image' for s in segs) >= 1  # a picture in a cell

def test_pptx_table_matches_docling_cell_for_cell():
    truth = docling_grids(DL/'pptx/groundtruth/powerpoint_sample.pptx.json')
    prs = open_pptx(DL/'pptx/sources/powerpoint_sample.pptx')
    ours = [expand(pptx_cells(sh.table)) for s in prs.slides for sh in s.shapes if sh.has_table]
    assert len(truth) == 1 and ours == truth

def test_docx_segments_order_and_images(tmp_path):
    segs = docx_segments(DL/'docx/sources/word_tables.docx', tmp_path)
    kinds = [s.kind for s in segs]
    assert kinds.count('table') == 7 and kinds[0] == 'text' and segs[0].content.startswith('# Test with tables')
    # each table follows the paragraph that introduces it
    i = kinds.index('table')
    assert segs[i-1].content.endswith('A uniform table') and 'Header 0.0' in segs[i].content
    assert [s.name for s in segs if s.kind == 'table'] == [f'table_{k}' for k in range(1, 8)]
    pics = [s for s in docx_segments(DL/'docx/sources/docx_grouped_images.docx', tmp_path/'g') if s.kind == 'image']
    assert pics and all(Path(s.content).stat().st_size > 0 for s in pics)
    assert len({s.name for s in pics}) == len(pics)

def test_pptx_segments(tmp_path):
    segs = pptx_segments(DL/'pptx/sources/powerpoint_sample.pptx', tmp_path)
    assert sorted({s.page for s in segs}) == [1, 2, 3]
    assert [s.kind for s in segs if s.page == 1] == ['text', 'table', 'text']
    assert segs[0].content == '# Test Table Slide' and 'colspan="3">Class1' in segs[1].content
    charts = [s for s in pptx_segments(DL/'pptx/sources/pptx_chart.pptx', tmp_path) if s.kind == 'table']
    assert len(charts) == 2 and all('<td>' in s.content for s in charts)
    (img,) = [s for s in pptx_segments(DL/'pptx/sources/powerpoint_with_image.pptx', tmp_path) if s.kind == 'image']
    assert Path(img.content).read_bytes()[:4] == b'\x89PNG'  # the embedded picture; the linked one has no bytes

def test_parse_office_writes_folder_and_cli(tmp_path):
    res = parse_office(DL/'docx/sources/word_tables.docx', tmp_path/'w')
    m = json.loads((tmp_path/'w'/'manifest.json').read_text())
    assert m['mode'] == 'native' and len(m['pages'][0]['tables']) == 7
    assert (tmp_path/'w'/'table_7.html').exists() and '[table_1](table_1.html)' in (tmp_path/'w'/'page_1.md').read_text()
    parser = argparse.ArgumentParser(); add_cli(parser.add_subparsers())
    a = parser.parse_args(['parse', str(DL/'pptx/sources/powerpoint_sample.pptx'), '--out', str(tmp_path/'p')])
    with redirect_stdout(io.StringIO()): assert a.func(a) == 0
    assert sorted(p.name for p in (tmp_path/'p').glob('page_*.md')) == ['page_1.md', 'page_2.md', 'page_3.md']

def test_bad_office_files_name_the_file(tmp_path):
    empty = tmp_path/'empty.docx'; empty.write_bytes(b'')
    text = tmp_path/'text.docx'; text.write_text('not a zip')
    other = tmp_path/'other.docx'
    with zipfile.ZipFile(other, 'w') as z: z.writestr('mimetype', 'application/epub+zip'); z.writestr('OEBPS/book.xhtml', '<html/>')
    broken = tmp_path/'broken.pptx'
    with zipfile.ZipFile(broken, 'w') as z: z.writestr('ppt/presentation.xml', 'not xml at all')
    for f, opener, why in [(empty, open_docx, 'empty'), (text, open_docx, 'not a zip package'),
                           (other, open_docx, 'it is a zip of OEBPS/book.xhtml, mimetype'),
                           (broken, open_pptx, 'cannot read the PPTX package'), (tmp_path/'gone.pptx', open_pptx, 'no such file')]:
        with pytest.raises(DocumentError, match=why) as e: opener(f)
        assert str(f) in str(e.value)
    import docx
    word = tmp_path/'slides.pptx'; docx.Document().save(word)  # a Word file named .pptx
    with pytest.raises(DocumentError, match='slides.pptx: not a PPTX file: it is a Word file'): open_pptx(word)
    parser = argparse.ArgumentParser(); add_cli(parser.add_subparsers())
    a = parser.parse_args(['parse', str(other), '--out', str(tmp_path/'o')])
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err): assert a.func(a) == 2
    assert str(other) in err.getvalue()


def test_a_format_registered_once_is_parsed_and_listed(tmp_path):
    "One row of ragnb.docs.documents.DOCUMENT_FORMATS: parse_document dispatches on it and `ragnb parse --help` lists it."
    from ragnb.docs.documents import DOCUMENT_FORMATS, DEFAULT_GLOB, DocumentFormat, register_format
    from ragnb.docs.parse import parse_document
    assert DEFAULT_GLOB == ('*.md', '*.mdx') and {s for s, f in DOCUMENT_FORMATS.items() if f.parse} == {
        '.pdf', '.docx', '.pptx'}
    got = []
    def parse_toy(path, out_dir, **options): got.append((path, sorted(options)[:2])); return 'parsed'
    register_format(DocumentFormat('.toy', 'TOY', parse_toy))
    try:
        assert parse_document(tmp_path/'a.TOY', tmp_path/'out') == 'parsed' and got[0][0] == tmp_path/'a.TOY'
        parser = argparse.ArgumentParser(); sub = parser.add_subparsers(); add_cli(sub)
        assert 'DOCX, PDF, PPTX or TOY file' in ' '.join(sub.choices['parse'].format_help().split())
    finally: del DOCUMENT_FORMATS['.toy']
    with pytest.raises(ValueError, match='lower case with its dot'): register_format(DocumentFormat('TOY', 'TOY'))


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
import os, subprocess, sys

# Issue 40, item 14 (hostile round 3): zip entries that lie ------------------------------------------------------------
def _lie_about(data:bytes, name:str, size:int) -> bytes:
    "The zip `data` with the central directory declaring `size` bytes uncompressed for entry `name`."
    out, i = bytearray(data), 0
    while (i := out.find(b'PK\x01\x02', i)) >= 0:
        n = int.from_bytes(out[i + 28:i + 30], 'little')
        if out[i + 46:i + 46 + n] == name.encode(): out[i + 24:i + 28] = size.to_bytes(4, 'little'); return bytes(out)
        i += 4
    raise AssertionError(f'no entry {name}')

def test_14_a_docx_whose_zip_entries_lie_about_their_sizes_is_a_clear_error(tmp_path):
    import docx
    from ragnb.docs.office import DocumentError, open_docx
    d = docx.Document(); d.add_paragraph('The Nile flows north. ' * 200); d.save(tmp_path/'ok.docx')
    good = (tmp_path/'ok.docx').read_bytes()
    bad = tmp_path/'lies_10.docx'; bad.write_bytes(_lie_about(good, 'word/document.xml', 10))   # holds far more
    with pytest.raises(DocumentError) as e: open_docx(bad)
    assert str(e.value).startswith(f'{bad}: a damaged DOCX package (part word/document.xml: Bad CRC-32')
    more = tmp_path/'lies_big.docx'; more.write_bytes(_lie_about(good, 'word/document.xml', 10_000_000))
    assert 'The Nile flows north.' in open_docx(more).paragraphs[0].text   # the data ends early but is intact: read
    r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'generate', str(tmp_path/'lies_10.docx'),
                        '--out', str(tmp_path/'qa.jsonl')], capture_output=True, text=True,
                       env={**os.environ, 'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1', 'OPENAI_API_KEY': 'x'})
    assert 'Traceback' not in r.stderr and 'lies_10.docx' in r.stderr, r.stderr[-1500:]
