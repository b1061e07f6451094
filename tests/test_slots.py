"""Issue 41: calls in flight follow what a server on this machine serves at once (llama.cpp's /props total_slots, vLLM),
one for a server that says nothing (llama-cpp-python's, which cuts a stream when a second call arrives), 16 remote.
Through the real client and the scripted server."""
import pytest
from ragnb.app.cli import main
from ragnb.core.llm import LLM, Pacing
from ragnb.core.settings import VLLM_SLOTS, default_concurrency
from ragnb.core.calls import Request
from ragnb.core.samples import sample_path
from ragnb.testing.scripted import ScriptedServer

EXAMPLE = sample_path('ragchecker', 'examples', 'checking_inputs.json')

def _batch(srv, llm, n=12):
    llm.batch([Request([{'role': 'user', 'content': f'Say hello {i}.'}]) for i in range(n)])
    return srv.max_inflight

@pytest.mark.parametrize('kw, want', [({'slots': 3}, 3), ({}, 1), ({'owned_by': 'vllm'}, VLLM_SLOTS)])
def test_an_llm_without_pacing_sends_what_the_local_server_serves(kw, want):
    with ScriptedServer(latency=0.05, **kw) as srv:
        llm = LLM(base_url=srv.base_url, api_key='x', model='scripted-test-model', cache=False, progress=False)
        assert llm.concurrency == want
        assert _batch(srv, llm) == min(want, 12)   # never more in flight than the server serves

def test_an_asked_concurrency_wins_and_a_replay_asks_nothing(tmp_path):
    with ScriptedServer(slots=3) as srv:
        asked = LLM(base_url=srv.base_url, api_key='x', cache=False, pacing=Pacing(concurrency=2))
        assert asked.concurrency == 2
        replay = LLM(base_url=srv.base_url, api_key='x', cache_path=tmp_path/'c.sqlite', replay=True)
        assert replay.concurrency == 1   # what a local endpoint gets without asking it: a replay sends nothing
    assert default_concurrency('https://api.openai.com/v1') == 16   # remote: no question asked

def test_ragnb_check_keeps_to_the_servers_slots(tmp_path, monkeypatch):
    with ScriptedServer(slots=2, latency=0.05) as srv:
        for k, v in {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'qwen2.5-1.5b',
                     'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
        assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'o.json')]) == 0
        assert srv.max_inflight == 2

def test_the_question_goes_straight_to_the_server_past_a_proxy(monkeypatch):
    for k in ('http_proxy', 'HTTP_PROXY'): monkeypatch.setenv(k, 'http://127.0.0.1:9')   # nothing listens there
    for k in ('no_proxy', 'NO_PROXY'): monkeypatch.delenv(k, raising=False)
    with ScriptedServer(slots=5) as srv:
        assert default_concurrency(srv.base_url) == 5
