"""Real-browser check: JupyterLab headless on 127.0.0.1, a notebook with ragnb's metrics widget opened in Debian's
chromium driven by Playwright; a click on "next" must change what the widget shows. Screenshots go to screenshots/.

Opt-in (it takes about a minute): `RAGNB_BROWSER=1 pytest tests/browser -s`. Needs `apt-get install chromium` and the
`playwright` Python package; Playwright's own browser downloads are never used (we pass chromium's path).
"""
import contextlib, json, os, secrets, shutil, socket, subprocess, sys, time, urllib.request
from pathlib import Path

import pytest

from ragnb.samples import sample_path

HERE = Path(__file__).resolve().parent
SHOTS = HERE / 'screenshots'
OUTPUTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')
CHROMIUM = os.environ.get('RAGNB_CHROMIUM', '/usr/bin/chromium')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run']

pytestmark = [
    pytest.mark.skipif(os.environ.get('RAGNB_BROWSER') != '1', reason='real-browser check is opt-in: set RAGNB_BROWSER=1'),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f'no chromium at {CHROMIUM} (apt-get install chromium)'),
]

NOTEBOOK_SOURCE = '''import json
from ragnb.widgets import MetricsViewer
results = json.load(open({path!r}))['results']
mv = MetricsViewer(results)
mv'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


REVIEW_SOURCE = '''import pandas as pd
from ragnb.widgets import ReviewViewer
ctx = "The Nile is about 6,650 km long. <b>Egypt</b> depends on it. The Amazon may be longer."
rv = ReviewViewer(pd.DataFrame({'context': [ctx, ctx], 'question': ['How long is the Nile?', 'Which river may be longer?'],
    'answer': ['About 6,650 km', 'The Amazon'], 'evidence': ['The Nile is about 6,650 km long.', 'The Amazon may be longer.'],
    'groundedness_score': [5, 4], 'groundedness_eval': ['stated', 'stated'], 'relevance_score': [4, 3],
    'relevance_eval': ['useful', 'ok'], 'standalone_score': [5, 5], 'standalone_eval': ['clear', 'clear'], 'kept': [True, True]}))
rv'''


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
    _notebook(root / 'widget_check.ipynb', NOTEBOOK_SOURCE.format(path=str(OUTPUTS)))
    _notebook(root / 'review_check.ipynb', REVIEW_SOURCE)
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
    "The text of the metrics widget's body (the HTML widget after the navigation row)."
    return page.locator('.ragnb-body').first.inner_text()


def _open_and_run(browser, base, token, name):
    "Open notebook `name` in JupyterLab, wait for its kernel, run its first cell with Shift+Enter; return the page."
    page = browser.new_page(viewport={'width': 1400, 'height': 1000})
    # a workspace of its own per notebook, so no tab of another test is restored beside it
    page.goto(f'{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token={token}', timeout=120_000)
    page.locator('.jp-NotebookPanel:visible .jp-Cell').first.wait_for(timeout=120_000)
    # wait until the status bar shows a started, idle kernel, then run the cell like a person would
    page.get_by_text('Python 3 (ipykernel) | Idle').wait_for(timeout=120_000)
    page.locator('.jp-NotebookPanel:visible .jp-Cell .cm-content').first.click()
    page.keyboard.press('Shift+Enter')
    return page


@contextlib.contextmanager
def _notebook_page(lab, notebook:str):
    "Debian's chromium on `notebook` in the running JupyterLab, its cell run; a failure leaves screenshots/failure.png."
    from playwright.sync_api import sync_playwright
    base, token = lab
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = None
        try:
            page = _open_and_run(browser, base, token, notebook)
            yield page
        except Exception:
            if page: page.screenshot(path=str(SHOTS / 'failure.png'))
            raise
        finally:
            browser.close()


def test_next_button_changes_the_widget(lab):
    with _notebook_page(lab, 'widget_check.ipynb') as page:
        nxt = page.locator('.ragnb-stepview button', has_text='next')
        nxt.wait_for(timeout=120_000)
        page.locator('.ragnb-stepview img').first.wait_for(timeout=60_000)
        before = _body_text(page)
        assert "longest river" in before and 'hallucination' in before
        page.locator('.ragnb-stepview').first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / '1_before_next.png'))
        nxt.click()
        page.locator('.ragnb-body', has_text='Congo flag').wait_for(timeout=60_000)
        after = _body_text(page)
        assert after != before and 'Congo flag' in after and 'longest river' not in after
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '2 / 2'
        assert nxt.is_disabled()
        page.screenshot(path=str(SHOTS / '2_after_next.png'))
        # keyboard: focus "previous" and press Enter
        prev = page.locator('.ragnb-stepview button', has_text='previous')
        prev.focus(); page.keyboard.press('Enter')
        page.locator('.ragnb-body', has_text='longest river').wait_for(timeout=60_000)
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '1 / 2'
        page.screenshot(path=str(SHOTS / '3_after_previous_by_keyboard.png'))
        # keyboard: the slider's handle takes the arrow keys
        page.locator('.ragnb-stepview .noUi-handle').first.focus(); page.keyboard.press('ArrowRight')
        page.locator('.ragnb-body', has_text='Congo flag').wait_for(timeout=60_000)
        assert page.locator('.ragnb-pos').first.inner_text().strip() == '2 / 2'


def test_review_decision_is_saved_from_the_browser(lab):
    with _notebook_page(lab, 'review_check.ipynb') as page:
        body = page.locator('.ragnb-body').first
        body.locator('mark').wait_for(timeout=120_000)
        assert body.locator('mark').inner_text() == 'The Nile is about 6,650 km long.'
        assert '<b>Egypt</b>' in body.inner_text()  # document HTML shows as text, not markup
        page.screenshot(path=str(SHOTS / '4_review_before_accept.png'))
        page.locator('.ragnb-stepview button', has_text='accept').click()
        page.locator('.ragnb-body', has_text='Which river may be longer?').wait_for(timeout=60_000)
        page.locator('.ragnb-stepview button', has_text='previous').click()
        page.locator('.ragnb-body', has_text='review: accept').wait_for(timeout=60_000)
        page.screenshot(path=str(SHOTS / '5_review_after_accept.png'))
        # the body is drawn from the kernel's DataFrame, so the decision shown is the decision stored
        assert 'critique: kept' in page.locator('.ragnb-body').first.inner_text()
