"""A second front end: the viewers in Voilà (a notebook served as a web app, its code hidden), driven by Debian's
chromium. Optional: runs with RAGNB_BROWSER=1 when the `voila` package is installed (`pip install voila`), else skips."""
import json, os, secrets, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest

HERE = Path(__file__).resolve().parent
SHOTS = Path(os.environ.get('RAGNB_SCREENSHOTS', HERE / 'screenshots'))
from ragnb.core.samples import sample_path
OUTPUTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')
CHROMIUM = os.environ.get('RAGNB_CHROMIUM', '/usr/bin/chromium')

pytestmark = [pytest.mark.skipif(os.environ.get('RAGNB_BROWSER') != '1', reason='real-browser check: set RAGNB_BROWSER=1'),
              pytest.mark.skipif(not OUTPUTS.exists(), reason='shared data not present')]

SOURCE = '''import json, pandas as pd
from ragnb.view.widgets import ReviewViewer, MetricsViewer
from ragnb.view.plots import plot_hit_rate
rv = ReviewViewer(pd.DataFrame({{'context': ["The Nile is about 6,650 km long. The Amazon may be longer."] * 2,
    'question': ['How long is the Nile?', 'Which river may be longer?'], 'answer': ['About 6,650 km', 'The Amazon'],
    'evidence': ['The Nile is about 6,650 km long.', 'The Amazon may be longer.']}}), model='scripted-test-model')
display(rv)
display(plot_hit_rate(pd.DataFrame({{'k': [1, 3], 'hit_rate': [.5, .75], 'recall': [.5, .75]}})))
MetricsViewer(json.load(open({path!r}))['results'])'''


def test_viewers_work_in_voila(tmp_path):
    pytest.importorskip('voila')
    from playwright.sync_api import sync_playwright
    nb = {'cells': [{'cell_type': 'code', 'execution_count': None, 'id': 'c0', 'metadata': {}, 'outputs': [],
                     'source': SOURCE.format(path=str(OUTPUTS))}],
          'metadata': {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}},
          'nbformat': 4, 'nbformat_minor': 5}
    (tmp_path / 'app.ipynb').write_text(json.dumps(nb))
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    env = dict(os.environ, MPLBACKEND='Agg', JUPYTER_RUNTIME_DIR=str(tmp_path / 'rt'), JUPYTER_CONFIG_DIR=str(tmp_path / 'cfg'))
    log = open(tmp_path / 'voila.log', 'w')
    proc = subprocess.Popen([sys.executable, '-m', 'voila', str(tmp_path / 'app.ipynb'), '--no-browser', f'--port={port}',
                             '--Voila.ip=127.0.0.1'], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        for _ in range(120):
            try: urllib.request.urlopen(f'http://127.0.0.1:{port}/', timeout=60).read(); break
            except OSError: time.sleep(0.5)
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=['--headless', '--no-sandbox', '--disable-gpu'])
            page = browser.new_page(viewport={'width': 1400, 'height': 1000})
            page.goto(f'http://127.0.0.1:{port}/', timeout=120_000)
            review = page.locator('.ragnb-stepview').first
            review.locator('mark').wait_for(timeout=120_000)
            assert 'model: scripted (scripted-test-model)' in review.inner_text() and 'row 1' in review.inner_text()
            assert page.locator('img[src^="data:image/png"]').count() >= 2  # the figure, and the map in the metrics viewer
            review.locator('button', has_text='next').click()
            page.locator('.ragnb-body', has_text='Which river may be longer?').wait_for(timeout=60_000)
            metrics = page.locator('.ragnb-stepview').nth(1)
            metrics.locator('button', has_text='next').click()
            page.locator('.ragnb-body', has_text='Congo flag').wait_for(timeout=60_000)
            page.screenshot(path=str(SHOTS / '10_voila.png'), full_page=True)
            browser.close()
    finally:
        proc.terminate()
        try: proc.wait(timeout=15)
        except subprocess.TimeoutExpired: proc.kill()
        log.close()
