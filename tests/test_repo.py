"The repository keeps itself in order: the hand-written README stays, module docstrings are whole sentences."
import ast, subprocess, sys
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
