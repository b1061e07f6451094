"The repository keeps itself in order: the hand-written README stays, module docstrings are whole sentences."
import ast, re, subprocess, sys
import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_nbdev_leaves_the_handwritten_readme_alone():
    # nbdev_prepare and nbdev_docs call nbdev_readme with chk_time; it must find README.md up to date and not rebuild it
    before = (ROOT/'README.md').read_bytes()
    r = subprocess.run([str(Path(sys.executable).with_name('nbdev_readme')), '--chk_time'], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (ROOT/'README.md').read_bytes() == before


def test_module_docstrings_are_whole_sentences():
    # nbdev takes the docstring from the notebook's `> subtitle` line: a subtitle wrapped over two lines is cut
    for f in sorted((ROOT/'ragnb').rglob('*.py')):
        doc = ast.get_docstring(ast.parse(f.read_text(encoding='utf-8')))
        if doc is not None: assert doc.rstrip().endswith(('.', '?', '!')), (f.name, doc[-60:])


NOTEBOOKS = sorted(p.name for p in (ROOT/'nbs').glob('*.ipynb'))

@pytest.mark.parametrize('nb', NOTEBOOKS)
def test_every_notebook_is_under_500_kb(nb):
    # a lesson's figures and page images are palette PNGs (`compact_figures`, `compact_png`), so it stays small when
    # re-run; a notebook over this is one to clone, diff and review slowly
    size = (ROOT/'nbs'/nb).stat().st_size
    assert size < 500_000, f"{nb}: {size:,} bytes, over 500 KB: compact its images (see nbs/50_plots.ipynb)"


def test_no_notebook_keeps_a_merge_conflict():
    # nbdev's merge driver writes a conflict as red markdown cells (`<<<<<<< local`, `=======`, `>>>>>>> remote`)
    # around both sides; committed, they read as lesson text and leave both halves in the module
    import json, re
    marker = re.compile(r'^(?:<span[^>]*><b>)?(?:<{7} |={7}(?:<|$)|>{7} )', re.M)
    bad = [f"{name}: cell {c.get('id')}" for name in NOTEBOOKS
           for c in json.loads((ROOT/'nbs'/name).read_text(encoding='utf-8'))['cells']
           if marker.search(''.join(c['source']))]
    assert not bad, bad


def _png_outputs(name):
    "(cell id, PNG bytes) of every image/png output of a lesson."
    import base64, json
    for c in json.loads((ROOT/'nbs'/name).read_text(encoding='utf-8'))['cells']:
        if re.search(r'^#\|\s*(slow|live)\s*$', ''.join(c['source']), re.M): continue   # not re-run offline: kept as made
        for o in c.get('outputs', []):
            png = (o.get('data') or {}).get('image/png')
            if png: yield c.get('id'), base64.b64decode(''.join(png) if isinstance(png, list) else png)


@pytest.mark.parametrize('nb', NOTEBOOKS)
def test_lesson_figures_are_pictures_at_100_dpi_or_more(nb):
    # a figure shown as '<Figure size 1100x420 with 2 Axes>' is a figure the reader never sees; one drawn at 45 dpi has
    # 4-pixel text that no projector makes readable (the workshop's once were)
    import io, json
    from PIL import Image
    text_only = [c.get('id') for c in json.loads((ROOT/'nbs'/nb).read_text(encoding='utf-8'))['cells']
                 for o in c.get('outputs', []) if set(o.get('data') or {}) == {'text/plain'}
                 and ''.join(o['data']['text/plain']).startswith('<Figure size')]
    assert not text_only, f"{nb}: figures shown as text in cells {text_only}: draw them with DisplayFigure"
    low = []
    for cid, png in _png_outputs(nb):
        dpi = Image.open(io.BytesIO(png)).info.get('dpi')
        if dpi and min(dpi) < 99.5: low.append((cid, round(min(dpi))))
    assert not low, f"{nb}: figures below 100 dpi (cell, dpi): {low}"


def test_the_site_build_refuses_a_figure_shown_as_text():
    import importlib.util, nbformat
    spec = importlib.util.spec_from_file_location('build_site', ROOT/'tools'/'build_site.py')
    bs = importlib.util.module_from_spec(spec); spec.loader.exec_module(bs)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('plot()', outputs=[nbformat.v4.new_output(
        'execute_result', data={'text/plain': '<Figure size 1100x420 with 2 Axes>'}, execution_count=1)])])
    with pytest.raises(ValueError, match='Figure size 1100x420'): bs.process(nb, None)
    ok = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('plot()', outputs=[nbformat.v4.new_output(
        'execute_result', data={'text/plain': '<Figure size 1100x420 with 2 Axes>', 'image/png': 'iVBO'},
        execution_count=1)])])
    assert len(bs.process(ok, None).cells) == 1
