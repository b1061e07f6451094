"""Real-browser check: JupyterLab headless on 127.0.0.1, notebooks with ragnb's viewers opened in Debian's chromium
driven by Playwright. Clicks and keys must change what the viewers show, the review widget's evidence must be in view
without scrolling, the parsing pane must wrap between words, and a saved notebook must open on its kernel and show the
viewers' snapshots before anything runs. Screenshots go to screenshots/ (ignored by git; RAGNB_SCREENSHOTS moves it).

CI runs it through `tests/browser/run.sh` (which installs Debian's chromium with apt-get when it is missing). By hand:
`RAGNB_BROWSER=1 pytest tests/browser`. With RAGNB_BROWSER=1 a missing chromium or playwright is a failure, not a skip.
Playwright's own browser downloads are never used (we pass chromium's path).
"""
import contextlib, json, os, secrets, shutil, socket, subprocess, sys, time, urllib.request
from pathlib import Path

import pytest

from ragnb.core.samples import sample_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHOTS = Path(os.environ.get('RAGNB_SCREENSHOTS', HERE / 'screenshots'))
OUTPUTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')
PDF = sample_path('documents', 'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/eu-004.pdf')
ARTICLE = sample_path('openai-cookbook', 'articles', 'techniques_to_improve_reliability.md')
CHROMIUM = os.environ.get('RAGNB_CHROMIUM', '/usr/bin/chromium')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run']

pytestmark = pytest.mark.skipif(os.environ.get('RAGNB_BROWSER') != '1',
                                reason='real-browser check: set RAGNB_BROWSER=1 (CI does, through tests/browser/run.sh)')


@pytest.fixture(scope='module', autouse=True)
def browser_present():
    "Asked for the browser check, a missing browser is an error: CI must not pass by skipping it."
    assert Path(CHROMIUM).exists(), f'no chromium at {CHROMIUM}: apt-get install chromium (tests/browser/run.sh does)'
    import playwright  # noqa: F401  (a dev requirement)


METRICS_SOURCE = '''import json
from ragnb.view.widgets import MetricsViewer
results = json.load(open({path!r}))['results']
mv = MetricsViewer(results, model='scripted-test-model')
mv'''

# a real passage of 3,000 characters whose evidence is its last sentence: the case where a scroll box hid it
REVIEW_SOURCE = '''import pandas as pd
from ragnb.view.widgets import ReviewViewer
ctx = open({path!r}).read()[:3000]
ev = ctx[ctx.rindex('. ', 0, 2900) + 2:][:120].rsplit(' ', 1)[0]
short = "The Nile is about 6,650 km long. <b>Egypt</b> depends on it. The Amazon may be longer."
rv = ReviewViewer(pd.DataFrame({{'context': [ctx, short], 'question': ['What does the passage end with?', 'Which river may be longer?'],
    'answer': ['A sentence', 'The Amazon'], 'evidence': [ev, 'The Amazon may be longer.'],
    'groundedness_score': [5, 4], 'groundedness_eval': ['stated', 'stated'], 'relevance_score': [4, 3],
    'relevance_eval': ['useful', 'ok'], 'standalone_score': [5, 5], 'standalone_eval': ['clear', 'clear'], 'kept': [True, True],
    'generator_model': ['scripted-test-model'] * 2, 'critic_model': ['scripted-test-model'] * 2}}))
rv'''

PARSING_SOURCE = '''import tempfile
from pathlib import Path
from ragnb.docs.pdf import parse_pdf
from ragnb.view.widgets import ParsingViewer
parsed = parse_pdf({path!r}, Path(tempfile.mkdtemp()) / 'eu-004', offline=True, pages=[2, 3], page_zoom=1.5, crop_zoom=1.5)
ParsingViewer(parsed)'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _notebook(path:Path, *sources):
    cells = [{'cell_type': 'code', 'execution_count': None, 'id': f'cell{i}', 'metadata': {}, 'outputs': [], 'source': src}
             for i, src in enumerate(sources)]
    nb = {'cells': cells,
          'metadata': {'kernelspec': {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'}},
          'nbformat': 4, 'nbformat_minor': 5}
    path.write_text(json.dumps(nb))


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    "A JupyterLab server on 127.0.0.1 with a fresh token, config and settings in a temporary folder; stopped afterwards."
    tmp_path = tmp_path_factory.mktemp('lab')
    root, cfg = tmp_path / 'root', tmp_path / 'config'
    root.mkdir(); (cfg / 'labconfig').mkdir(parents=True)
    # no "news" pop-up: it would cover the notebook and try to reach the network
    (cfg / 'labconfig' / 'page_config.json').write_text(json.dumps(
        {'disabledExtensions': {'@jupyterlab/apputils-extension:announcements': True}}))
    # every cell drawn, not only those scrolled into view, so a test can read a long saved notebook whole
    tracker = tmp_path / 'settings' / '@jupyterlab' / 'notebook-extension'
    tracker.mkdir(parents=True)
    (tracker / 'tracker.jupyterlab-settings').write_text(json.dumps({'windowingMode': 'none'}))
    _notebook(root / 'widget_check.ipynb', METRICS_SOURCE.format(path=str(OUTPUTS)))
    _notebook(root / 'review_check.ipynb', REVIEW_SOURCE.format(path=str(ARTICLE)))
    _notebook(root / 'parsing_check.ipynb', PARSING_SOURCE.format(path=str(PDF)))
    shutil.copy(ROOT / 'nbs' / '90_workshop.ipynb', root / 'saved_workshop.ipynb')  # as saved in git, outputs and all
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(cfg), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / 'settings'),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / 'workspaces'), JUPYTER_RUNTIME_DIR=str(tmp_path / 'runtime'),
               MPLBACKEND='Agg')
    cmd = [sys.executable, '-m', 'jupyter', 'lab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
           f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}', '--ServerApp.open_browser=False',
           '--LabApp.extension_manager=readonly'] + (['--allow-root'] if os.geteuid() == 0 else [])
    log = open(tmp_path / 'lab.log', 'w')
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f'http://127.0.0.1:{port}'
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f'{base}/api/status?token={token}', timeout=2).read(); break
            except OSError:
                if proc.poll() is not None: pytest.fail(f'jupyter lab exited: {(tmp_path / "lab.log").read_text()[-2000:]}')
                time.sleep(0.5)
        else: pytest.fail('jupyter lab did not answer within 60 s')
        yield base, token
    finally:
        proc.terminate()
        try: proc.wait(timeout=15)
        except subprocess.TimeoutExpired: proc.kill()
        log.close()


def _body_text(page) -> str:
    "The text of the first viewer's body (the HTML widget after the navigation row)."
    return page.locator('.ragnb-body').first.inner_text()


def _open(browser, base, token, name):
    "Open notebook `name` in JupyterLab and wait until its kernel has started by itself and is idle."
    page = browser.new_page(viewport={'width': 1400, 'height': 1000})
    # a workspace of its own per notebook, so no tab of another test is restored beside it
    page.goto(f'{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token={token}', timeout=120_000)
    page.locator('.jp-NotebookPanel:visible .jp-Cell').first.wait_for(timeout=120_000)
    # the notebook names its kernel, so JupyterLab starts it without a "Select Kernel" dialog
    page.get_by_text('Python 3 (ipykernel) | Idle').wait_for(timeout=120_000)
    assert page.locator('.jp-Dialog').count() == 0, 'JupyterLab asked something (Select Kernel?) on opening'
    return page


@contextlib.contextmanager
def _notebook_page(lab, notebook:str, run:bool=True):
    "Debian's chromium on `notebook` in the running JupyterLab, its first cell run; a failure leaves screenshots/failure_*.png."
    from playwright.sync_api import sync_playwright
    base, token = lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = None
        try:
            page = _open(browser, base, token, notebook)
            if run:  # run the cell like a person would
                page.locator('.jp-NotebookPanel:visible .jp-Cell .cm-content').first.click()
                page.keyboard.press('Shift+Enter')
            yield page
        except Exception:
            if page: page.screenshot(path=str(SHOTS / f'failure_{Path(notebook).stem}.png'))
            raise
        finally:
            browser.close()


def _shot(page, name:str, locator=None):
    "A screenshot of the page (or of one element) in SHOTS."
    (locator or page).screenshot(path=str(SHOTS / name))


def test_metrics_viewer_steps_by_click_and_keys(lab):
    with _notebook_page(lab, 'widget_check.ipynb') as page:
        nxt = page.locator('.ragnb-stepview button', has_text='next')
        nxt.wait_for(timeout=120_000)
        page.locator('.ragnb-stepview img').first.wait_for(timeout=60_000)
        before = _body_text(page)
        assert "longest river" in before and 'hallucination' in before
        assert 'model: scripted (scripted-test-model)' in page.locator('.ragnb-stepview').first.inner_text()
        # the entailment map is shown at its own size, so its 8 pt labels stay at 11 px
        natural, shown = page.locator('.ragnb-stepview img').first.evaluate('i => [i.naturalWidth, i.getBoundingClientRect().width]')
        assert shown >= natural - 1, (natural, shown)
        # one numbering: the map's chunks, the claim tables and the metric text all say c1..c4
        assert 'c1, c2, c4' in before and 'chunk 0' not in before
        page.locator('.ragnb-stepview').first.scroll_into_view_if_needed()
        _shot(page, '1_metrics_first.png')
        nxt.click()
        page.locator('.ragnb-body', has_text='Congo flag').wait_for(timeout=60_000)
        after = _body_text(page)
        assert after != before and 'Congo flag' in after and 'longest river' not in after
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '2 / 2'
        assert nxt.is_disabled()
        _shot(page, '2_metrics_after_next.png')
        # keyboard: focus "previous" and press Enter
        prev = page.locator('.ragnb-stepview button', has_text='previous')
        prev.focus(); page.keyboard.press('Enter')
        page.locator('.ragnb-body', has_text='longest river').wait_for(timeout=60_000)
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '1 / 2'
        # keyboard: the slider's handle takes the arrow keys
        page.locator('.ragnb-stepview .noUi-handle').first.focus(); page.keyboard.press('ArrowRight')
        page.locator('.ragnb-body', has_text='Congo flag').wait_for(timeout=60_000)
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '2 / 2'


EVIDENCE_IN_VIEW = '''box => {
  const m = box.querySelector('mark'), b = box.getBoundingClientRect(), r = m.getBoundingClientRect();
  return {scrollTop: box.scrollTop, boxTop: b.top, boxBottom: b.bottom, markTop: r.top, markBottom: r.bottom,
          viewport: window.innerHeight, lineHeight: parseFloat(getComputedStyle(m.parentElement).lineHeight),
          fontSize: parseFloat(getComputedStyle(m.parentElement).fontSize)};
}'''


@pytest.mark.skipif(not ARTICLE.exists(), reason='shared data not present')
def test_review_shows_the_evidence_and_keeps_decisions(lab):
    with _notebook_page(lab, 'review_check.ipynb') as page:
        body = page.locator('.ragnb-body').first
        body.locator('mark').first.wait_for(timeout=120_000)
        page.locator('.ragnb-stepview').first.scroll_into_view_if_needed()
        # the evidence is the passage's last sentence, 2,900 characters in, and yet in view without scrolling
        box = page.locator('.ragnb-passage').first
        g = box.evaluate(EVIDENCE_IN_VIEW)
        assert g['scrollTop'] == 0 and g['boxTop'] <= g['markTop'] and g['markBottom'] <= g['boxBottom'], g
        assert g['markBottom'] <= g['viewport'], g
        assert g['lineHeight'] <= 1.6 * g['fontSize'], g  # normal line spacing, not 28 px
        assert 'characters before]' in box.inner_text() and 'model: scripted (scripted-test-model)' in page.locator('.ragnb-stepview').first.inner_text()
        assert 'row 1' in body.inner_text() and page.locator('.ragnb-pos').first.inner_text().strip() == '1 / 2'
        # the edit fields are wide, multi-line boxes holding the whole question
        fields = page.locator('.ragnb-edit textarea')
        assert fields.count() == 2 and all(fields.nth(k).bounding_box()['width'] >= 400 for k in range(2))
        _shot(page, '3_review_evidence_in_view.png')
        fields.nth(0).fill('What does the passage end with, exactly?')
        page.locator('.ragnb-stepview button', has_text='save edit').click()
        page.locator('.ragnb-body', has_text='Which river may be longer?').wait_for(timeout=60_000)
        assert '<b>Egypt</b>' in _body_text(page)  # document HTML shows as text, not markup
        page.locator('.ragnb-stepview button', has_text='accept').click()
        page.locator('.ragnb-body', has_text='review: accept').wait_for(timeout=60_000)
        _shot(page, '4_review_after_accept.png')
        page.locator('.ragnb-stepview button', has_text='previous').click()
        page.locator('.ragnb-body', has_text='review: edit').wait_for(timeout=60_000)
        # back on the edited row: the field holds the edit, and the body shows it too
        page.wait_for_function("() => document.querySelector('.ragnb-edit textarea').value.includes('exactly')", timeout=60_000)
        assert 'edited Q: What does the passage end with, exactly?' in _body_text(page)
        _shot(page, '5_review_back_on_the_edit.png')


BROKEN_WORDS = r'''pre => {
  const t = pre.firstChild, text = t.textContent, broken = [], re = /\S+/g;
  let m;
  while ((m = re.exec(text))) {
    if (/[-\/]/.test(m[0])) continue;  // a hyphen or slash is a fair place to wrap
    const r = document.createRange(); r.setStart(t, m.index); r.setEnd(t, m.index + m[0].length);
    const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
    if (tops.size > 1) broken.push(m[0]);
  }
  return broken;
}'''


@pytest.mark.skipif(not PDF.exists(), reason='shared data not present')
def test_parsing_viewer_wraps_between_words_and_shows_labels_large_enough(lab):
    with _notebook_page(lab, 'parsing_check.ipynb') as page:
        body = page.locator('.ragnb-body').first
        body.locator('pre').first.wait_for(timeout=120_000)
        assert 'Table 6.1' in body.inner_text() and 'no model: offline PyMuPDF parse' in page.locator('.ragnb-stepview').first.inner_text()
        pre = body.locator('pre').first
        assert pre.evaluate(BROKEN_WORDS) == []  # e.g. not "member s|tates"
        # the marked page (an A4 page, 595 pt wide) is drawn at 1.3 px a point: its 8 pt region labels at 10.4 px
        width = body.locator('img').first.evaluate('i => i.getBoundingClientRect().width')
        assert abs(width - 595 * 1.3) < 3, width
        # page and parse on one screen: side by side when wide enough, else the page's box above the parse
        page.locator('.ragnb-stepview').first.evaluate('e => e.scrollIntoView({block: "start"})')
        top = pre.evaluate('p => p.getBoundingClientRect().top')
        assert top < page.viewport_size['height'] - 150, top  # at least a few lines of the parse in view
        _shot(page, '6_parsing_page_2.png')
        page.locator('.ragnb-stepview button', has_text='next').click()
        page.locator('.ragnb-body', has_text='Page 3').wait_for(timeout=60_000)
        assert page.locator('.ragnb-body pre').first.evaluate(BROKEN_WORDS) == []
        _shot(page, '7_parsing_page_3.png')


def test_saved_workshop_opens_on_its_kernel_and_shows_snapshots(lab):
    "The workshop as saved in git, opened and not run: kernel starts by itself, viewers show their snapshots, $ stays $."
    with _notebook_page(lab, 'saved_workshop.ipynb', run=False) as page:
        page.locator('.ragnb-snapshot').first.wait_for(timeout=60_000)
        text = page.locator('.jp-NotebookPanel:visible').evaluate('e => e.textContent')
        assert 'VBox(children=' not in text and '<Figure size' not in text
        titles = page.locator('.ragnb-snapshot').evaluate_all('es => es.map(e => e.textContent.split("item ")[0].trim())')
        assert [t.split(' \u00b7')[0] for t in titles] == ['Parsed pages', 'Synthetic questions', 'RAGChecker results'], titles
        assert all('model' in t for t in titles), titles
        outputs = page.locator('.jp-OutputArea-output')
        # JupyterLab draws a long notebook's cells a batch at a time: wait for the last one
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                               ".some(e => e.textContent.includes('the cache saved'))", timeout=60_000)
        k = max(i for i, t in enumerate(outputs.evaluate_all('es => es.map(e => e.textContent)')) if 'the cache saved' in t)
        usage = outputs.nth(k)
        usage.scroll_into_view_if_needed()
        assert '$0.0000' in usage.inner_text() and usage.locator('mjx-container, .MathJax').count() == 0
        _shot(page, '9_saved_workshop_usage.png', usage)
        page.locator('.ragnb-snapshot').filter(has_text='Synthetic questions').scroll_into_view_if_needed()
        _shot(page, '8_saved_workshop_review_snapshot.png')
