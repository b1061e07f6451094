"Unbounded documents (issue 27, item 10): pixel budgets for PDF pages and pictures, XML budgets for DOCX and PPTX."
import base64, zlib
import pymupdf, pytest
from ragnb.app.cli import main
from ragnb.core.llm import LLM
from ragnb.docs.office import docx_segments, image_pixels, parse_office, pptx_segments
from ragnb.docs.pages import DocumentError
from ragnb.docs.pdf import MAX_SIDE, big_images, cap_images, fit_zoom, mark_page, page_messages, parse_pdf, render_page
from ragnb.testing.hostile import (big_page_pdf, docx_with_picture, paragraphs_docx, pdf_bytes, picture_pdf, png_header,
                                   pptx_with_picture, repack)
from ragnb.testing.scripted import ScriptedServer

# --- PDF: pictures over the pixel cap are blanked before anything decodes them ---

def test_pdf_picture_over_the_pixel_cap_is_named_and_never_decoded(tmp_path, capsys):
    f = picture_pdf(tmp_path/'bomb.pdf', 12_000, 12_000)  # 144 Mpx declared, 60 KB on disk
    assert f.stat().st_size < 100_000
    assert [b[1:] for b in big_images(pymupdf.open(f), 1)] == [('Im1', 12_000, 12_000)]
    res = parse_pdf(f, tmp_path/'out', offline=True)
    w = [x for x in res.pages[0].warnings if 'max_image_pixels' in x]
    assert len(w) == 1 and 'bomb.pdf: page 1: image Im1' in w[0] and '12,000 x 12,000 pixels' in w[0], res.pages[0].warnings
    assert 'not decoded, left blank' in w[0] and 'A page with one picture.' in res.pages[0].markdown
    assert main(['parse', str(f), '--out', str(tmp_path/'cli'), '--offline']) == 0
    assert 'image Im1 (object 5) is 12,000 x 12,000 pixels' in capsys.readouterr().err  # said on the console too
    # a cap above it decodes the picture (MuPDF pads the missing rows), with no warning
    ok = parse_pdf(f, tmp_path/'ok', offline=True, page_zoom=0.5, crop_zoom=0.5, max_image_pixels=200_000_000)
    assert not [x for x in ok.pages[0].warnings if 'max_image_pixels' in x]

def test_cap_images_changes_the_open_document_only(tmp_path):
    f = picture_pdf(tmp_path/'bomb.pdf', 5_000, 5_000)
    doc = pymupdf.open(f)
    warned = cap_images(doc, 1, max_pixels=1_000_000, what='bomb.pdf')
    assert len(warned) == 1 and 'over the 1,000,000-pixel cap (max_image_pixels)' in warned[0]
    assert doc[0].get_image_info()[0]['width'] == 1 and big_images(doc, 1, 1_000_000) == []
    assert cap_images(doc, 1, max_pixels=1_000_000) == []  # done once
    assert pymupdf.open(f)[0].get_image_info()[0]['width'] == 5_000  # the file itself is untouched
    assert cap_images(pymupdf.open(f), 1) == []  # under the default cap: kept

def test_inline_picture_over_the_cap_names_file_and_page(tmp_path):
    data = zlib.compress(bytes(100))
    content = (b'q 100 0 0 100 0 0 cm BI /W 20000 /H 20000 /CS /G /BPC 8 /F /Fl /L %d ID ' % len(data) + data
               + b' EI Q')
    (tmp_path/'inline.pdf').write_bytes(pdf_bytes([
        b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
        b'<< /Length %d >>\nstream\n' % len(content) + content + b'\nendstream']))
    with pytest.raises(DocumentError, match=r'inline.pdf: page 1: an inline image of 20,000 x 20,000 pixels'):
        cap_images(pymupdf.open(tmp_path/'inline.pdf'), 1, what=str(tmp_path/'inline.pdf'))


# --- PDF: page images within a pixel budget ---

def test_fit_zoom_keeps_every_render_in_budget():
    a4 = pymupdf.Rect(0, 0, 595, 842)
    assert fit_zoom(a4, 1) == 1  # under the budget: the zoom asked for
    z = fit_zoom(a4, 3)
    assert 2.4 < z < 3 and (a4 * pymupdf.Matrix(z, z)).irect.height == MAX_SIDE
    for rect, zoom, side, pixels in [(a4, 3, 1000, 10**9), (a4, 3, 5000, 500_000), (pymupdf.Rect(0, 0, 14_400, 20), 4,
                                     2048, 4 * 2**20), (pymupdf.Rect(0, 0, 14_400, 14_400), 3, 2048, 2048**2)]:
        ir = (rect * pymupdf.Matrix(*(2 * [fit_zoom(rect, zoom, side, pixels)]))).irect
        assert max(ir.width, ir.height) <= side and ir.width * ir.height <= pixels, (rect, ir)

def test_huge_page_renders_downscaled_without_a_traceback(tmp_path, capsys):
    f = big_page_pdf(tmp_path/'huge.pdf', 14_400)  # zoom 3 would be 43,200 pixels a side, which MuPDF refuses
    assert main(['parse', str(f), '--out', str(tmp_path/'out'), '--offline']) == 0
    err = capsys.readouterr().err
    assert 'Traceback' not in err and 'small text may be unreadable' in err and '14,400 x 14,400 pt' in err
    sizes = [(p.width, p.height) for p in map(pymupdf.Pixmap, map(str, (tmp_path/'out').glob('*.png')))]
    assert sizes and max(max(s) for s in sizes) <= MAX_SIDE, sizes
    assert render_page(pymupdf.open(f)[0], 3, max_side=300).width == 300  # a budget of one's own

def test_page_sent_to_the_vision_model_is_downscaled(tmp_path):
    f = big_page_pdf(tmp_path/'p5000.pdf', 5_000)  # zoom 3 made this a 15,000-pixel image, sent whole
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache=False, progress=False)
        res = parse_pdf(f, tmp_path/'out', llm=llm)
        calls = srv.calls('pdf_page')
    assert res.failures == [] and len(calls) == 1
    url = calls[0]['body']['messages'][-1]['content'][1]['image_url']['url']
    sent = pymupdf.Pixmap(base64.b64decode(url.split(',', 1)[1]))
    assert (sent.width, sent.height) == (MAX_SIDE, MAX_SIDE)
    assert any('drawn at zoom 0.41' in w for w in res.pages[0].warnings), res.pages[0].warnings

def test_page_budget_options_of_the_command(tmp_path):
    f = picture_pdf(tmp_path/'p.pdf', 10, 10)
    assert main(['parse', str(f), '--out', str(tmp_path/'out'), '--offline', '--max-page-px', '500']) == 0
    page = pymupdf.Pixmap(str(next((tmp_path/'out').glob('*_1.png'))))
    assert max(page.width, page.height) == 500
    assert main(['parse', str(f), '--out', str(tmp_path/'o2'), '--offline', '--max-page-mpx', '0.1']) == 0
    page = pymupdf.Pixmap(str(next((tmp_path/'o2').glob('*_1.png'))))
    assert page.width * page.height <= 100_000
    marked = mark_page(f, 1, [], tmp_path/'m', zoom=3, max_side=100)  # the function takes the same budget
    assert max(pymupdf.Pixmap(str(marked)).width, pymupdf.Pixmap(str(marked)).height) == 100
    assert '<= 100' not in page_messages(marked, [])[0]['content']  # (the prompt itself is unchanged)


# --- DOCX and PPTX: XML elements counted before anything is parsed; pictures' pixels from their headers ---

def test_docx_xml_element_budget_is_exact_and_names_the_part(tmp_path, capsys):
    n = 40_000  # 1.4 MB of document.xml: its count crosses a 1 MB read
    f = paragraphs_docx(tmp_path/'many.docx', n)
    assert f.stat().st_size < 100_000
    segs = docx_segments(f, tmp_path/'o1', max_xml_elements=3*n + 8)  # the comment and declarations are not elements
    assert segs[0].content.count('x') == n
    with pytest.raises(DocumentError, match=r"many.docx: part word/document.xml takes the package's XML past 120,007 "
                                            r"elements \(max_xml_elements\)"):
        docx_segments(f, tmp_path/'o2', max_xml_elements=3*n + 7)
    assert main(['parse', str(f), '--out', str(tmp_path/'cli'), '--max-xml-elements', '1000']) == 2
    assert 'word/document.xml' in capsys.readouterr().err
    assert not (tmp_path/'o2').exists() and not (tmp_path/'cli').exists()

def test_pptx_xml_element_budget(tmp_path):
    f = pptx_with_picture(tmp_path/'s.pptx')
    assert sorted(s.kind for s in pptx_segments(f, tmp_path/'o')) == ['image', 'text']
    with pytest.raises(DocumentError, match=r"s.pptx: part \S+ takes the package's XML past 500 elements"):
        pptx_segments(f, tmp_path/'o', max_xml_elements=500)

@pytest.mark.parametrize('kind', ['docx', 'pptx'])
def test_office_picture_over_the_pixel_cap_is_not_read(tmp_path, kind):
    src = (docx_with_picture if kind == 'docx' else pptx_with_picture)(tmp_path/f'ok.{kind}')
    bomb = repack(src, tmp_path/f'bomb.{kind}', png_header(30_000, 30_000))  # 900 Mpx declared in a few hundred bytes
    assert image_pixels(png_header(30_000, 30_000)) != (30_000, 30_000)  # Pillow refuses the header outright...
    res = parse_office(bomb, tmp_path/'out')
    w = [x for p in res.pages for x in p.warnings]
    assert len(w) == 1 and 'media/image1.png not read' in w[0] and 'max_image_pixels' in w[0], w
    assert not list((tmp_path/'out').glob('*.png'))
    mid = repack(src, tmp_path/f'mid.{kind}', png_header(12_000, 12_000))  # ... and decides for itself below 2x
    assert image_pixels(png_header(12_000, 12_000)) == (12_000, 12_000)
    w = [x for p in parse_office(mid, tmp_path/'mid').pages for x in p.warnings]
    assert len(w) == 1 and '12,000 x 12,000 pixels (144 Mpx), over the 89,478,485-pixel cap' in w[0], w
    ok = parse_office(mid, tmp_path/'ok', max_image_pixels=200_000_000)  # a larger cap reads it
    assert not [x for p in ok.pages for x in p.warnings] and len(list((tmp_path/'ok').glob('*.png'))) == 1

def test_cli_pixel_cap_for_office_pictures(tmp_path, capsys):
    f = docx_with_picture(tmp_path/'ok.docx')
    assert main(['parse', str(f), '--out', str(tmp_path/'out'), '--max-image-mpx', '0.000001']) == 0
    assert '4 x 4 pixels (0 Mpx), over the 1-pixel cap (max_image_pixels)' in capsys.readouterr().err
