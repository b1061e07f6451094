"""Live tests: ragnb against a real OpenAI-compatible endpoint. Skipped unless RAGNB_LIVE_BASE_URL is set.

    RAGNB_LIVE_BASE_URL=http://127.0.0.1:8088/v1 RAGNB_LIVE_MODEL=qwen pytest tests/live -m live -s

Optional: RAGNB_LIVE_API_KEY (default 'none'), RAGNB_LIVE_CACHE_DIR (reuse replies between runs; default a fresh
folder, so every call is made), RAGNB_LIVE_REPORT (write the figures as JSON there), RAGNB_LIVE_CONCURRENCY (default 2).
"""
import json, os, time
from pathlib import Path
import pytest
from ragnb.core.llm import LLM, Deadlines, Pacing

REPORT: dict = {}

def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for it in items:
        if here in Path(it.fspath).parents:
            it.add_marker(pytest.mark.live)
            if not os.environ.get('RAGNB_LIVE_BASE_URL'):
                it.add_marker(pytest.mark.skip(reason='live test: set RAGNB_LIVE_BASE_URL (+ RAGNB_LIVE_MODEL, RAGNB_LIVE_API_KEY)'))

@pytest.fixture
def live_llm(tmp_path_factory):
    "An LLM on the live endpoint (the autouse fixture of tests/ hides OPENAI_*; these variables are read here)."
    cache = os.environ.get('RAGNB_LIVE_CACHE_DIR') or tmp_path_factory.mktemp('live-cache')
    def make(**kw):
        return LLM(base_url=os.environ['RAGNB_LIVE_BASE_URL'], api_key=os.environ.get('RAGNB_LIVE_API_KEY') or 'none',
                   model=os.environ.get('RAGNB_LIVE_MODEL') or 'gpt-4o-mini', cache_path=Path(cache)/'calls.sqlite',
                   pacing=Pacing(concurrency=int(os.environ.get('RAGNB_LIVE_CONCURRENCY', 2))), deadlines=Deadlines(total=600), progress=False, **kw)
    return make

@pytest.fixture
def shared():
    "The repository's own sample data (nbs/data): the same files the live tests read."
    from ragnb.core.samples import sample_path
    return sample_path()

@pytest.fixture
def record():
    "record(name, **figures): figures for the closing summary (and RAGNB_LIVE_REPORT)."
    def add(name, **kw): REPORT[name] = kw
    return add

def pytest_terminal_summary(terminalreporter):
    if not REPORT: return
    terminalreporter.section('ragnb live figures')
    for k, v in REPORT.items(): terminalreporter.write_line(f"{k}: {json.dumps(v, default=str)}")
    if p := os.environ.get('RAGNB_LIVE_REPORT'): Path(p).write_text(json.dumps(REPORT, indent=2, default=str))
