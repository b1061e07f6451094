"""Shared fixtures: ragnb's scripted OpenAI-compatible server on 127.0.0.1 and an LLM pointed at it; the `extended` mark.

Tests read the sample data committed in nbs/data (`ragnb.core.samples.sample_path`). A test that needs the larger shared
data sets carries `@pytest.mark.extended(*parts)` (the parts name the set, as for `ragnb.core.samples.shared_path`): it
skips, on its own and saying why, when that set is absent."""
import pytest
from ragnb.core.llm import LLM, Retries
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import shared_path

def pytest_configure(config):
    config.addinivalue_line('markers', 'extended(*parts): reads the shared data set `shared_path(*parts)` '
                                       '($RAGNB_SHARED_DATA); skipped when it is absent')

def pytest_runtest_setup(item):
    for mark in item.iter_markers('extended'):
        try: shared_path(*mark.args)
        except FileNotFoundError as e: pytest.skip(f'extended test: shared data absent: {e}')

@pytest.fixture(autouse=True)
def _no_real_endpoint(monkeypatch, tmp_path):
    "Tests never see a real endpoint or key from the environment, and never use the user's cache."
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL', 'RAGNB_VISION_MODEL', 'RAGNB_LIVE', 'RAGNB_RECORD'):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'ragnb-cache'))

@pytest.fixture
def server():
    with ScriptedServer() as srv: yield srv

@pytest.fixture
def llm(server, tmp_path):
    return LLM(base_url=server.base_url, api_key='sk-test', model='scripted-test-model',
               cache_path=tmp_path/'calls.sqlite', progress=False, retries=Retries(backoff=0.01))

# The order tests start in, for pytest-xdist (pyproject's addopts: -n auto --dist worksteal): the notebooks first, the
# longest first, so that no long notebook starts last and keeps one core busy while the other waits. Only the order
# changes; every test still runs. The longest, as measured (pytest --durations on a busy 2-core machine: 23_pdf 255 s,
# 90_workshop 62, 50_plots 59, 82_demo 45, 62_systems 36, 60_retrieval 28, 51_widgets 20, the rest under 17):
LONG_NOTEBOOKS = ('23_pdf', '90_workshop', '50_plots', '82_demo', '62_systems', '60_retrieval', '51_widgets',
                  '42_metaeval', '31_diversity')

def pytest_collection_modifyitems(config, items):
    def rank(item):
        if getattr(item, 'originalname', None) != 'test_notebook': return (1, 0)
        nb = item.callspec.params['nb'].removesuffix('.ipynb')
        return (0, LONG_NOTEBOOKS.index(nb) if nb in LONG_NOTEBOOKS else len(LONG_NOTEBOOKS))
    items.sort(key=rank)  # stable: the rest keep pytest's order
