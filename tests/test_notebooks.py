"Every lesson notebook runs top to bottom (nbdev_test), offline, cells flagged live/browser/slow skipped."
import json, os, sqlite3, subprocess, sys
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1]/'nbs'
NOTEBOOKS = sorted(p.name for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))

HIDDEN = ('OPENAI_API_KEY', 'OPENAI_BASE_URL', 'RAGNB_LIVE', 'RAGNB_RECORD')  # a notebook never sees these

@pytest.fixture(scope='session')
def nb_runner():
    "tests/nb_runner.py: imports nbdev and the libraries once, then forks a fresh process per notebook."
    p = subprocess.Popen([sys.executable, str(Path(__file__).with_name('nb_runner.py'))], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd=NBS.parent,
                         env={k: v for k, v in os.environ.items() if k not in HIDDEN})
    yield p
    p.stdin.close(); p.wait(timeout=60)

@pytest.mark.parametrize('nb', NOTEBOOKS)
def test_notebook(nb, nb_runner, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN}
    log = tmp_path/'nbdev_test.log'
    nb_runner.stdin.write(json.dumps([str(NBS/nb), str(log), env, 900]) + '\n'); nb_runner.stdin.flush()
    line = nb_runner.stdout.readline()
    assert line, f'tests/nb_runner.py ended (exit {nb_runner.poll()})'
    rc, out = json.loads(line), log.read_text(errors='replace')
    assert rc == 0, out[-4000:]

CACHES = sorted(p.name for p in (NBS/'cache').glob('*.sqlite') if p.stem != 'regions')   # regions: no model calls
SHOWN_AS = {'qwen2.5-coder-1.5b-instruct-q4_k_m': 'Qwen2.5-Coder-1.5B'}   # a real model, as the lessons name it

def _markdown(nb:Path) -> str:
    return '\n'.join(c['source'] if isinstance(c['source'], str) else ''.join(c['source'])
                     for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'markdown')

@pytest.mark.parametrize('cache', CACHES)
def test_a_lesson_names_whose_replies_it_replays(cache):
    "A lesson's text names the real model its cache holds replies of, and says so when some replies are scripted."
    db = NBS/'cache'/cache
    nb = NBS/f'{db.stem}.ipynb'
    assert nb.exists(), f"{cache} belongs to no lesson"
    con = sqlite3.connect(db)
    try: models = {m for (m,) in con.execute("SELECT DISTINCT model FROM calls WHERE kind = 'chat'")}
    finally: con.close()
    text = _markdown(nb)
    for m in sorted(models - {'scripted-test-model'}):
        assert m in SHOWN_AS, f"{cache} holds replies of {m}, a model no lesson introduces"
        assert SHOWN_AS[m] in text, f"{nb.name} replays {m} but its text never names {SHOWN_AS[m]}"
    if 'scripted-test-model' in models:
        assert 'scripted' in text.lower(), f"{nb.name} replays scripted replies but its text never says so"

def test_lesson_caches_stay_small():
    "The committed caches are text replies, not megabytes of binary: 8 MB for all of them."
    sizes = {p.name: p.stat().st_size for p in (NBS/'cache').glob('*.sqlite')}
    assert sum(sizes.values()) < 8e6, sizes
