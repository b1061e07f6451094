"Streamed replies and their deadlines, per-task reply caps, cached prompt tokens, prefix-ordered calls (issue 25)."
import json
import pytest
from ragnb.core.llm import LLM, by_prefix, Deadlines, Pacing, Replies, Retries
from ragnb.core.settings import DEADLINES, task_cap, default_concurrency, is_local
from ragnb.core.calls import Request
from ragnb.core.prices import cost_of
from ragnb.testing.scripted import ScriptedServer, lesson_llm
from ragnb.check.checker import run_checks
from ragnb.core.samples import sample_path

def msg(t): return [{'role': 'user', 'content': t}]

def make(srv, tmp_path=None, **kw):
    kw = {'cache': tmp_path is not None, 'retries': Retries(max_retries=0, backoff=0.01), 'progress': False, **kw}
    return LLM(base_url=srv.base_url, api_key='sk-test', model='m',
               cache_path=tmp_path/'calls.sqlite' if tmp_path else None, **kw)

def records(tmp_path):
    import sqlite3
    with sqlite3.connect(tmp_path/'calls.sqlite') as c:
        return {k: json.loads(r) for k, r in c.execute('SELECT key, record FROM calls')}


def test_a_streamed_reply_is_cached_as_a_whole_one_would_be(tmp_path):
    with ScriptedServer() as srv:
        s = make(srv, tmp_path/'s').call(msg('hello there'), prompt='greet@1')
        w = make(srv, tmp_path/'w', replies=Replies(stream=False)).call(msg('hello there'), prompt='greet@1')
        assert srv.requests[0]['body']['stream'] is True and 'stream' not in srv.requests[1]['body']
    assert s.ok and (s.text, s.model, s.finish_reason, s.key) == (w.text, w.model, w.finish_reason, w.key)
    assert records(tmp_path/'s') == records(tmp_path/'w')   # text, model, usage and finish_reason, under the same key
    again = make(srv, tmp_path/'s', replies=Replies(stream=False), replay=True).call(msg('hello there'), prompt='greet@1')
    assert again.cached and again.text == s.text


def test_a_slow_but_steady_model_is_not_cut_off():
    # 8 chunks 0.3 s apart: the whole reply takes longer than both the first-token and the between-token deadline
    with ScriptedServer(chunk_delay=0.3, latency=0.5) as srv:
        r = make(srv, deadlines=Deadlines(first_token=0.9, idle=0.9, total=60)).call(msg('hello there'))
    assert r.ok and r.text == 'Hello! How can I help you today?', r.failure


def test_keep_alive_comments_do_not_count_as_tokens():
    with ScriptedServer(faults={'drip': 1.0}, drip_every=0.05) as srv:
        r = make(srv, deadlines=Deadlines(first_token=0.5, idle=60, total=60), retries=Retries(backoff=0.01, max_retries=1)).call(msg('hello'))
    assert r.failure.kind == 'timeout' and r.attempts == 2
    assert 'no first token within 0.5 s' in r.failure.message and 'RAGNB_FIRST_TOKEN_TIMEOUT' in r.failure.message


@pytest.mark.parametrize('server', [dict(faults={'drip': 1.0}, drip_every=0.05), dict(trickle=0.05)],
                         ids=['keep-alive drip', 'byte drip'])
def test_a_dripping_server_is_stopped_by_the_total_cap(server):
    with ScriptedServer(**server) as srv:   # generous first-token and idle deadlines: only the cap can stop it
        r = make(srv, deadlines=Deadlines(first_token=300, idle=300, total=1)).call(msg('hello there'))
    assert r.failure.kind == 'timeout' and 'no complete reply within 1 s' in r.failure.message
    assert 'RAGNB_TIMEOUT' in r.failure.message


def test_a_reply_that_stops_halfway_is_cut_by_the_idle_deadline():
    with ScriptedServer(faults={'stall': 1.0}, hang=5) as srv:
        r = make(srv, deadlines=Deadlines(idle=0.5, total=60)).call(msg('hello there'))
    assert r.failure.kind == 'timeout' and 'no new token for 0.5 s' in r.failure.message
    assert 'RAGNB_IDLE_TIMEOUT' in r.failure.message


def test_a_stream_cut_mid_reply_is_a_retried_connection_failure():
    with ScriptedServer(faults={'drop': 1.0}) as srv:
        r = make(srv, retries=Retries(backoff=0.01, max_retries=2)).call(msg('hello there'))
    assert r.failure.kind == 'connection' and r.attempts == 3 and 'ended before the reply was complete' in r.failure.message


@pytest.mark.parametrize('mode', ['refuse', 'ignore'])
def test_servers_that_refuse_or_ignore_streaming(mode):
    with ScriptedServer(streaming=mode) as srv:
        llm = make(srv)
        a, b = llm.call(msg('hello there')), llm.call(msg('hello again'))
        bodies = [q['body'] for q in srv.requests]
    assert a.ok and b.ok and a.text == 'Hello! How can I help you today?'
    assert 'stream' not in bodies[-1]   # learnt: the next call asks for a whole reply
    assert len(bodies) == (3 if mode == 'refuse' else 2)   # a refusal costs a request, not a retry (max_retries=0)


def test_a_server_that_ignores_include_usage_still_gives_token_counts():
    with ScriptedServer(stream_usage=False) as srv:
        r = make(srv).call(msg('hello there'))
    assert r.ok and r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0


def test_streamed_faults_and_cut_offs(tmp_path):
    with ScriptedServer(truncate=1.0) as srv:
        r = make(srv, tmp_path, retries=Retries(max_retries=0, backoff=0.01, retry_truncated=0)).call(msg('hello there'))
    assert r.failure.kind == 'truncated' and r.text == 'Hello! How can I'
    (rec,) = records(tmp_path).values()
    assert rec['finish_reason'] == 'length'
    with ScriptedServer(faults={'429': 1.0}) as srv:
        assert make(srv).call(msg('hi')).failure.kind == 'rate_limit'


def test_deadlines_are_chosen_per_endpoint(monkeypatch):
    for v in ('RAGNB_TIMEOUT', 'RAGNB_FIRST_TOKEN_TIMEOUT', 'RAGNB_IDLE_TIMEOUT'): monkeypatch.delenv(v, raising=False)
    here = LLM(base_url='http://127.0.0.1:8091/v1', cache=False)
    away = LLM(base_url='https://api.example.com/v1', cache=False)
    assert (here.first_token_timeout, here.idle_timeout, here.timeout) == tuple(DEADLINES['local'].values())
    assert (away.first_token_timeout, away.idle_timeout, away.timeout) == tuple(DEADLINES['remote'].values())
    assert here.first_token_timeout > away.first_token_timeout   # a CPU reading a long prompt
    monkeypatch.setenv('RAGNB_FIRST_TOKEN_TIMEOUT', '7'); monkeypatch.setenv('RAGNB_IDLE_TIMEOUT', '3')
    assert (LLM(cache=False).first_token_timeout, LLM(cache=False).idle_timeout) == (7, 3)
    assert default_concurrency('http://localhost:8080/v1') == 1 and default_concurrency('https://api.openai.com/v1') == 16
    assert is_local('http://127.0.0.1:1/v1') and not is_local('http://10.0.0.2/v1')


def test_waiting_for_a_slot_does_not_eat_the_deadline():
    # one call at a time, each 0.6 s: the fourth waits 1.8 s for its turn, longer than its 1 s deadline
    with ScriptedServer(latency=0.6) as srv:
        rs = make(srv, pacing=Pacing(concurrency=1, adaptive=False), deadlines=Deadlines(total=1, first_token=1)).batch(
            [msg(f'hello {i}') for i in range(4)])
    assert all(r.ok for r in rs), [r.failure for r in rs]


def test_each_task_gets_a_reply_cap(monkeypatch):
    monkeypatch.delenv('RAGNB_MAX_TOKENS', raising=False)
    with ScriptedServer() as srv:
        make(srv).call(msg('check'), prompt='check_claims@1')
        make(srv).call(msg('page'), prompt='pdf_page@1')
        make(srv).call(msg('anything'))
        make(srv, replies=Replies(max_tokens=0)).call(msg('uncapped'), prompt='check_claims@1')
        make(srv, replies=Replies(max_tokens=77)).call(msg('capped'), prompt='pdf_page@1')
        monkeypatch.setenv('RAGNB_MAX_TOKENS', '55')
        make(srv).call(msg('from env'), prompt='pdf_page@1')
        caps = [q['body'].get('max_tokens') for q in srv.requests]
    assert caps == [task_cap('check_claims@1'), task_cap('pdf_page@1'), None, None, 77, 55]
    assert task_cap('check_claims@1') < task_cap('pdf_page@1')


def test_lessons_keep_their_recorded_keys(tmp_path, monkeypatch):
    monkeypatch.delenv('RAGNB_RECORD', raising=False); monkeypatch.delenv('RAGNB_MAX_TOKENS', raising=False)
    llm = lesson_llm('x', cache_dir=tmp_path)
    assert llm.max_tokens is None and not llm.task_caps   # recorded without caps: the same keys


def test_cached_prompt_tokens_are_counted_and_priced():
    long = 'Shared instructions. ' * 40
    with ScriptedServer(prompt_cache=True, model=None) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='gpt-4o-mini', cache=False, progress=False)
        a, b = llm.call(msg(long + 'first')), llm.call(msg(long + 'second'))
    assert a.usage.cached_tokens == 0 and b.usage.cached_tokens > 100
    assert b.usage.cost == pytest.approx(cost_of('gpt-4o-mini', b.usage.prompt_tokens, b.usage.completion_tokens,
                                                 b.usage.cached_tokens))
    assert b.usage.cost < cost_of('gpt-4o-mini', b.usage.prompt_tokens, b.usage.completion_tokens)
    assert 'prompt cache' in str(llm.usage)


def test_prefix_order_puts_calls_that_start_alike_together():
    reqs = [Request(msg(f'{ctx} question {q}')) for q in range(3) for ctx in ('alpha ' * 50, 'beta ' * 50)]
    ordered = by_prefix(reqs)
    assert [r.messages[0]['content'][:5] for r in ordered] == ['alpha'] * 3 + ['beta '] * 3
    got = {}
    for on in (False, True):
        with ScriptedServer(prompt_cache=True) as srv:
            llm = LLM(base_url=srv.base_url, api_key='k', model='m', cache=False, progress=False, pacing=Pacing(concurrency=1, adaptive=False))
            llm.batch(by_prefix(reqs) if on else reqs)
            got[on] = llm.usage.cached_tokens
    assert got[True] > 2 * got[False]


def test_checker_sends_calls_in_prefix_order(tmp_path):
    inputs = sample_path('ragchecker', 'examples', 'checking_inputs.json')
    order = {}
    for on in (False, True):
        with ScriptedServer() as srv:
            llm = LLM(base_url=srv.base_url, api_key='k', model='m', cache=False, progress=False, pacing=Pacing(concurrency=1, adaptive=False))
            run = run_checks(inputs, llm, prefix_order=on)
            order[on] = [json.dumps(q['body']['messages'], sort_keys=True, ensure_ascii=False, separators=(',', ':')) for q in srv.calls('check_claims')]
        assert not any(r.ragnb.get('failures') for r in run.results)
    assert sorted(order[False]) == sorted(order[True]) and order[False] != order[True]   # the same calls, reordered
    descents = lambda o: sum(a > b for a, b in zip(o, o[1:]))
    assert descents(order[True]) <= 2 < descents(order[False])   # ascending within each of the (at most 3) rounds


class _Interrupting:
    "A chat server that streams the first `bad` replies' text, then '[DONE]' without a finish reason; whole after that."
    def __init__(self, bad:int):
        import http.server, json, threading
        n = [0]
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                self.rfile.read(int(self.headers['Content-Length'])); n[0] += 1
                self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.end_headers()
                for t in ('The Nile ', 'flows '):
                    self.wfile.write(b'data: ' + json.dumps({'choices': [{'index': 0, 'delta': {'content': t}}]}).encode()
                                     + b'\n\n')
                if n[0] > bad:
                    fin = {'choices': [{'index': 0, 'delta': {'content': 'north.'}, 'finish_reason': 'stop'}]}
                    self.wfile.write(b'data: ' + json.dumps(fin).encode() + b'\n\n')
                self.wfile.write(b'data: [DONE]\n\n')
        self.srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.base_url = f'http://127.0.0.1:{self.srv.server_port}/v1'

def test_a_stream_stopped_without_a_finish_reason_is_interrupted_not_a_reply(tmp_path):
    "Issue 41: llama-cpp-python ends a stream it interrupts with '[DONE]' and no finish reason; that is not a reply."
    from ragnb.core.llm import LLM
    s = _Interrupting(bad=10)
    try:
        llm = LLM(base_url=s.base_url, api_key='x', model='m', cache=False, progress=False,
                  retries=Retries(backoff=0.01, max_retries=1))
        r = llm.call(msg('Where does the Nile flow?'))
        assert r.failure.kind == 'interrupted' and r.attempts == 2 and '--concurrency 1' in r.failure.message
        assert r.text is None                                       # 'The Nile flows ' was never taken for the answer
    finally: s.srv.shutdown()
    s = _Interrupting(bad=1)                                        # interrupted once, then whole: retried, kept
    try:
        r = LLM(base_url=s.base_url, api_key='x', model='m', cache=False, progress=False,
                retries=Retries(backoff=0.01, max_retries=1)).call(msg('Where does the Nile flow?'))
        assert r.ok and r.text == 'The Nile flows north.' and r.attempts == 2
    finally: s.srv.shutdown()


def test_a_stream_closed_before_its_first_token_is_asked_again_whole_and_its_parts_joined():
    # llama-cpp-python's server opens the stream, then its chat template fails on a content list: no event, no reason
    parts = [{'role': 'user', 'content': [{'type': 'text', 'text': 'hello'}, {'type': 'text', 'text': 'there'}]}]
    with ScriptedServer(string_content='stream') as srv:
        r = make(srv, retries=Retries(backoff=0.01, max_retries=2)).call(parts)
        bodies = [q['body'] for q in srv.requests]
    assert r.ok, r.failure   # before: three streamed attempts, each "ended before the reply was complete"
    assert bodies[0]['stream'] is True and 'stream' not in bodies[-1]
    assert isinstance(bodies[-1]['messages'][0]['content'], str)   # the server said why; the parts went joined
