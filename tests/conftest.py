"Shared fixtures: ragnb's scripted OpenAI-compatible server on 127.0.0.1 and an LLM pointed at it."
import os
from pathlib import Path
import pytest
from ragnb.llm import LLM
from ragnb.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get('RAGNB_SHARED', ROOT.parent/'shared')) / 'data'

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
               cache_path=tmp_path/'calls.sqlite', progress=False, backoff=0.01)

@pytest.fixture
def shared_data():
    if not SHARED.exists(): pytest.skip(f'shared data not found at {SHARED}')
    return SHARED
