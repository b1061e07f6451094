"The LLM layer against ragnb's test server, through the real openai client."
import asyncio, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from ragnb.core.llm import LLM, run_sync, Deadlines, Endpoint, Pacing, Replies, Retries
from ragnb.core.calls import Request
from ragnb.core.prices import PRICES
from ragnb.core.cache import CallCache, cache_key
from ragnb.testing.scripted import lesson_llm
from ragnb.testing.scripted import ScriptedServer

def msg(t): return [{'role': 'user', 'content': t}]

def test_cache_hit_makes_no_http_call(llm, server):
    r1 = llm.call(msg('hello one'))
    n = len(server.requests)
    r2 = llm.call(msg('hello one'))
    assert r1.ok and not r1.cached and r2.cached and r2.text == r1.text
    assert len(server.requests) == n == 1
    assert llm.usage.calls == 1 and llm.usage.cached == 1
    assert r2.usage.saved_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens > 0 and r2.usage.prompt_tokens == 0

def test_cache_key_includes_model_and_prompt_version(llm, server):
    llm.call(msg('same text'), prompt='p@1')
    llm.call(msg('same text'), prompt='p@2')
    llm.call(msg('same text'), prompt='p@1', model='other-model')
    assert len(server.requests) == 3
    assert [r['prompt'] for r in server.requests] == ['p@1', 'p@2', 'p@1']

def test_replay_miss_names_the_call(llm, tmp_path):
    llm.call(msg('recorded question'))
    rp = LLM(base_url=llm.base_url, model=llm.model, cache_path=tmp_path/'calls.sqlite', replay=True)
    assert rp.call(msg('recorded question')).cached
    miss = rp.call(msg('never recorded question'), prompt='factoid_qa@1', item_id='chunk-7')
    assert miss.failure.kind == 'replay_miss'
    for part in ('chunk-7', 'factoid_qa@1', 'scripted-test-model', 'never recorded'):
        assert part in miss.failure.message
    with pytest.raises(Exception, match='replay'):
        miss.unwrap()

def test_replay_makes_no_request_even_on_miss(tmp_path):
    with ScriptedServer() as srv:
        rp = LLM(base_url=srv.base_url, model='m', cache_path=tmp_path/'c.sqlite', replay=True, progress=False)
        rs = rp.batch([msg(f'q{i}') for i in range(5)])
        assert [r.failure.kind for r in rs] == ['replay_miss'] * 5
        assert srv.requests == []

@pytest.mark.parametrize('seed', [0, 1])
def test_faults_every_item_gets_a_result(tmp_path, seed):
    N = 3
    with ScriptedServer(faults={'429': 0.08, '500': 0.07, 'timeout': 0.05}, seed=seed, hang=2.0) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  deadlines=Deadlines(total=1.0), retries=Retries(max_retries=N, backoff=0.01), pacing=Pacing(concurrency=16), progress=False)
        reqs = [Request(msg(f'question number {i}'), id=f'q{i}') for i in range(120)]
        rs = llm.batch(reqs)
    assert [r.id for r in rs] == [f'q{i}' for i in range(120)]
    assert all(r.ok or r.failure.kind in {'rate_limit', 'server_error', 'timeout'} for r in rs)
    assert all(1 <= r.attempts <= N + 1 for r in rs)
    assert any(r.attempts > 1 for r in rs)  # faults really happened and were retried
    # the server saw the attempts we report, per item; only an attempt our deadline ended may not have reached it
    # (on a loaded machine the request can still be on its way when the client gives up)
    per_item = {}
    for q in srv.requests:
        per_item[q['body']['messages'][0]['content']] = per_item.get(q['body']['messages'][0]['content'], 0) + 1
    seen = [per_item.get(f'question number {i}', 0) for i in range(120)]
    unsure = [sum(e['kind'] == 'timeout' for e in r.errors) for r in rs]
    assert all(r.attempts - u <= s <= r.attempts for r, s, u in zip(rs, seen, unsure)), \
        [(r.id, r.attempts, s, r.errors) for r, s, u in zip(rs, seen, unsure) if not r.attempts - u <= s <= r.attempts]
    assert sum(seen) >= sum(r.attempts for r in rs) - sum(unsure) and sum(seen) > 120
    # usage counted once per successful call
    ok = [r for r in rs if r.ok]
    assert llm.usage.calls == len(ok)
    assert llm.usage.prompt_tokens == sum(r.usage.prompt_tokens for r in ok)
    assert llm.usage.failed == len(rs) - len(ok)
    assert len(CallCache(tmp_path/'c.sqlite')) == len(ok)

def test_retry_after_is_honoured_and_retries_are_bounded(tmp_path):
    with ScriptedServer(faults={'429': 1.0}, retry_after=0.2) as srv:
        llm = LLM(base_url=srv.base_url, model='m', cache_path=tmp_path/'c.sqlite', retries=Retries(max_retries=2, backoff=0.001), progress=False)
        t = time.perf_counter()
        r = llm.call(msg('hi'), item_id='x')
        elapsed = time.perf_counter() - t
    assert r.failure.kind == 'rate_limit' and r.attempts == 3 and len(srv.requests) == 3
    assert elapsed >= 0.4  # two waits of the server's 0.2 s, not the 1 ms backoff
    assert 'x' in str(r.failure)

def test_bad_request_is_not_retried(tmp_path):
    with ScriptedServer(faults={'400': 1.0}) as srv:
        llm = LLM(base_url=srv.base_url, model='m', cache_path=tmp_path/'c.sqlite', retries=Retries(max_retries=4), progress=False)
        r = llm.call(msg('hi'))
    assert r.failure.kind == 'bad_request' and r.attempts == 1 and len(srv.requests) == 1

def test_parse_failure_is_recorded_and_batch_continues(llm):
    def parse(t):
        if 'number 3' in t: raise ValueError('no rating in reply')
        return t.upper()
    rs = llm.batch([msg(f'report number {i}') for i in range(6)], parse=parse)
    assert [r.ok for r in rs] == [True, True, True, False, True, True]
    assert rs[3].failure.kind == 'parse' and 'no rating' in rs[3].failure.message and rs[3].text
    assert rs[0].value == rs[0].text.upper()

def test_concurrency_is_bounded(tmp_path):
    with ScriptedServer(latency=0.05) as srv:
        llm = LLM(base_url=srv.base_url, model='m', cache_path=tmp_path/'c.sqlite', pacing=Pacing(concurrency=4), progress=False)
        llm.batch([msg(f'q{i}') for i in range(24)])
    assert srv.max_inflight == 4

def test_sync_api_inside_running_event_loop(llm):
    async def inside_jupyter_like_loop():
        return llm.call(msg('hello from a cell'))      # sync call while a loop runs in this thread
    r = asyncio.run(inside_jupyter_like_loop())
    assert r.ok and 'Hello' in r.text

def test_async_api(llm):
    async def go():
        rs = await llm.abatch([msg('a'), msg('b')])
        one = await llm.acall(msg('c'))
        return rs, one
    rs, one = asyncio.run(go())
    assert all(r.ok for r in rs) and one.ok

def test_cost_from_extensible_price_table(llm, monkeypatch):
    monkeypatch.setitem(PRICES, 'scripted-test-model', (1.0, 2.0))
    r = llm.call(msg('what does this cost'))
    assert r.usage.cost == pytest.approx((r.usage.prompt_tokens * 1.0 + r.usage.completion_tokens * 2.0) / 1e6)
    assert llm.usage.cost == pytest.approx(r.usage.cost) and llm.usage.unpriced == 0
    monkeypatch.delitem(PRICES, 'scripted-test-model')
    llm.call(msg('an unpriced model'))
    assert llm.usage.unpriced == 1

def test_estimate_before_batch(llm):
    reqs = [msg(f'estimate me {i}') for i in range(10)]
    llm.batch(reqs[:4])
    e = llm.estimate(reqs)
    assert (e['requests'], e['cached'], e['to_call']) == (10, 4, 6)
    assert e['prompt_tokens'] > 0

def test_api_key_never_written(tmp_path):
    secret = 'sk-SECRET-never-on-disk-8c1f'
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key=secret, model='m', cache_path=tmp_path/'cache'/'c.sqlite', progress=False)
        llm.batch([msg(f'q{i}') for i in range(5)])
        llm.embed(['some text'], model='e')
        assert {k.lower(): v for k, v in srv.requests[0]['headers'].items()}['authorization'] == f'Bearer {secret}'  # it was really used
    assert secret not in repr(llm)
    files = list((tmp_path/'cache').iterdir())
    assert files and all(secret.encode() not in f.read_bytes() for f in files)

def test_embeddings_cached_per_text(llm, server):
    a = llm.embed(['alpha beta', 'gamma'], model='e')
    n = len(server.requests)
    b = llm.embed(['gamma', 'delta'], model='e')
    assert len(server.requests) == n + 1 and server.requests[-1]['body']['input'] == ['delta']
    assert (b[0] == a[1]).all() and a.shape == (2, 256)

KILL_SCRIPT = textwrap.dedent('''
    import sys
    from ragnb.core.llm import LLM, Pacing
    llm = LLM(base_url=sys.argv[1], model='m', cache_path=sys.argv[2], pacing=Pacing(concurrency=4), progress=False)
    llm.batch([[{'role':'user','content':f'item {i}'}] for i in range(60)])
''')

def test_killed_batch_rerun_makes_only_missing_calls(tmp_path):
    cache = tmp_path/'c.sqlite'
    with ScriptedServer(latency=0.05) as srv:
        p = subprocess.Popen([sys.executable, '-c', KILL_SCRIPT, srv.base_url, str(cache)])
        deadline = time.time() + 30
        while len(srv.requests) < 24 and time.time() < deadline: time.sleep(0.01)
        p.send_signal(signal.SIGKILL); p.wait()
        done = len(CallCache(cache))
        assert 0 < done < 60
        before = len(srv.requests)
        llm = LLM(base_url=srv.base_url, model='m', cache_path=cache, pacing=Pacing(concurrency=4), progress=False)
        rs = llm.batch([[{'role': 'user', 'content': f'item {i}'}] for i in range(60)])
        assert all(r.ok for r in rs)
        assert len(srv.requests) - before == 60 - done
        assert sum(r.cached for r in rs) == done

def test_lesson_llm_replays(tmp_path, monkeypatch):
    l = lesson_llm('x', cache_dir=tmp_path)
    assert l.replay and l.cache.path == tmp_path/'x.sqlite'
    assert l.call(msg('not recorded')).failure.kind == 'replay_miss'

def test_lesson_llm_records_then_replays(tmp_path, monkeypatch):
    monkeypatch.setenv('RAGNB_RECORD', '1')
    rec = lesson_llm('lesson', cache_dir=tmp_path)
    assert not rec.replay and rec.base_url != 'http://127.0.0.1:8765/v1'  # its own server, on a free port
    first = rec.call(msg('hello from a lesson'))
    assert first.ok and not first.cached
    monkeypatch.delenv('RAGNB_RECORD')
    rp = lesson_llm('lesson', cache_dir=tmp_path)
    again = rp.call(msg('hello from a lesson'))
    assert rp.replay and again.cached and again.text == first.text


def test_lesson_llm_records_a_real_endpoint_under_its_model(tmp_path, monkeypatch):
    monkeypatch.delenv('RAGNB_TIMEOUT', raising=False)
    with ScriptedServer() as srv:   # standing in for a real endpoint, e.g. `ragnb local serve`
        monkeypatch.setenv('RAGNB_RECORD', srv.base_url)
        rec = lesson_llm('lesson', cache_dir=tmp_path, model='small-real-model')
        assert (rec.base_url, rec.replay, rec.concurrency, rec.timeout) == (srv.base_url, False, 1, 600.0)
        first = rec.call(msg('hello from a real model'))
        assert first.ok and not first.cached and srv.requests[-1]['model'] == 'small-real-model'
    monkeypatch.delenv('RAGNB_RECORD')   # the server is gone: replay is offline
    again = lesson_llm('lesson', cache_dir=tmp_path, model='small-real-model').call(msg('hello from a real model'))
    assert again.cached and again.text == first.text
    scripted = lesson_llm('lesson', cache_dir=tmp_path).call(msg('hello from a real model'))
    assert scripted.failure.kind == 'replay_miss'   # filed under the real model's name, not the scripted one's

def test_lesson_llm_records_scripted_vectors_beside_a_real_model(tmp_path, monkeypatch):
    with ScriptedServer() as real:   # a real chat endpoint that serves no embeddings in the lesson's name
        monkeypatch.setenv('RAGNB_RECORD', real.base_url)
        chat = lesson_llm('lesson', cache_dir=tmp_path, model='small-real-model')
        vectors = lesson_llm('lesson', cache_dir=tmp_path)   # the scripted server's: never sent to `real`
        assert vectors.base_url not in (real.base_url, 'http://127.0.0.1:8765/v1') and not vectors.replay
        v = vectors.embed(['BM25 ranks documents.'])
        assert chat.call(msg('hello')).ok and [q['model'] for q in real.requests] == ['small-real-model']
    monkeypatch.delenv('RAGNB_RECORD')
    back = lesson_llm('lesson', cache_dir=tmp_path).embed(['BM25 ranks documents.'])
    assert back.shape == v.shape and (back == v).all()

def test_lesson_llm_scripted_recording_keeps_off_a_real_models_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('RAGNB_RECORD', '1')
    with pytest.raises(ValueError, match=r'record it from that model with RAGNB_RECORD=<base_url>'):
        lesson_llm('lesson', cache_dir=tmp_path, model='small-real-model')


SCHEMA = {'title': 'claims', 'type': 'object', 'required': ['claims'], 'additionalProperties': False,
          'properties': {'claims': {'type': 'array', 'items': {'type': 'string'}}}}
CLAIMS_RULE = {'claims_test': lambda messages, rng: 'Here you go:\n```json\n{"claims": ["The Nile is in Africa."]}\n```'}

def _ask(l, i, **kw):
    return l.call([{'role': 'user', 'content': f'Claims of text {i}, as JSON'}], 'claims_test', f'q{i}', schema=SCHEMA, **kw)

@pytest.mark.parametrize('behaviour, first, second, learnt', [
    ('json_object', ['json_schema', 'json_object'], 'json_object', [('json_schema', 'refused'), ('json_object', 'ok')]),
    ('refuse', ['json_schema', 'json_object', None], None, [('json_schema', 'refused'), ('json_object', 'refused')]),
    # ignored: the reply is still used (parsed from the text); the next call tries the next way, which is ignored too
    ('ignore', ['json_schema'], 'json_object', [('json_schema', 'ignored'), ('json_object', 'ignored')])])
def test_json_schema_refused_falls_back_and_is_remembered(tmp_path, behaviour, first, second, learnt):
    with ScriptedServer(structured=behaviour, rules=CLAIMS_RULE) as srv:
        l = LLM(base_url=srv.base_url, api_key='sk-secret-abcdef123', model='scripted-test-model', cache_path=tmp_path/'c.sqlite', progress=False)
        r = _ask(l, 1)
        sent = [(q['body'].get('response_format') or {}).get('type') for q in srv.requests]
        assert r.ok and sent == first and r.structured == first[-1]
        assert 'Nile' in r.value and l.usage.failed == 0                       # never a failed call for a missing feature
        # a new LLM on the same cache folder starts with what was learnt: one request, the working way
        l2 = LLM(base_url=srv.base_url, api_key='sk-secret-abcdef123', model='scripted-test-model', cache_path=tmp_path/'c.sqlite', progress=False)
        n = len(srv.requests)
        r2 = _ask(l2, 2)
        assert r2.ok and len(srv.requests) == n + 1
        assert (srv.requests[-1]['body'].get('response_format') or {}).get('type') == second
    got = [(f['feature'].split(':')[1], f['status']) for f in l2.features()]
    assert got == learnt
    raw = (tmp_path/'c.sqlite').read_bytes() + b''.join(p.read_bytes() for p in tmp_path.glob('c.sqlite*'))
    assert b'sk-secret' not in raw                                              # the key is never stored

def test_structured_off_and_replay_send_no_schema_unless_recorded(tmp_path):
    with ScriptedServer(rules=CLAIMS_RULE) as srv:
        off = LLM(base_url=srv.base_url, api_key='k', model='scripted-test-model', cache_path=tmp_path/'a.sqlite', replies=Replies(structured='off'))
        assert _ask(off, 1).ok and 'response_format' not in srv.requests[-1]['body']
        rec = LLM(base_url=srv.base_url, api_key='k', model='scripted-test-model', cache_path=tmp_path/'b.sqlite')
        assert _ask(rec, 1).structured == 'json_schema'
    # replay: the recording says json_schema works, so the replayed key includes it; a recording without features sends none
    rp = LLM(base_url='http://127.0.0.1:9/v1', model='scripted-test-model', cache_path=tmp_path/'b.sqlite', replay=True,
             endpoint=Endpoint(cache_endpoint=srv.base_url))
    assert _ask(rp, 1).cached
    rp0 = LLM(base_url='http://127.0.0.1:9/v1', model='scripted-test-model', cache_path=tmp_path/'a.sqlite', replay=True,
              endpoint=Endpoint(cache_endpoint=srv.base_url))
    assert _ask(rp0, 1).cached and rp0.structured_mode() is None


def test_text_parts_joined_for_a_server_that_takes_only_string_content(tmp_path):
    "llama-cpp-python's templates fail on content lists: text-only lists are joined into one string and sent again."
    parts = lambda *ts: [{'role': 'user', 'content': [{'type': 'text', 'text': t} for t in ts]}]
    with ScriptedServer(string_content=True) as srv:
        llm = LLM(base_url=srv.base_url, api_key='t', cache_path=tmp_path/'c.sqlite', progress=False, retries=Retries(max_retries=0))
        first = llm.call(parts('Say', 'hello'))
        assert first.ok and [type(q['body']['messages'][0]['content']) for q in srv.requests] == [list, str]
        assert srv.requests[1]['body']['messages'][0]['content'] == 'Say\n\nhello' and first.attempts == 2
        second = llm.call(parts('Say', 'hello again'))   # remembered: sent joined at once
        assert second.ok and second.attempts == 1 and isinstance(srv.requests[-1]['body']['messages'][0]['content'], str)
        img = [{'role': 'user', 'content': [{'type': 'text', 'text': 'What is shown?'},
                                            {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,AA=='}}]}]
        seen = len(srv.requests)
        refused = llm.call(img)   # an image is never dropped to make a text-only server answer
        assert refused.failure.kind == 'server_error' and len(srv.requests) == seen + 1
    again = LLM(base_url=srv.base_url, api_key='t', cache_path=tmp_path/'c.sqlite', progress=False, replay=True)
    assert again.call(parts('Say', 'hello')).text == first.text   # cached under the messages as written

def test_errors_built_by_hand_take_the_request_type_openai_builds():
    "openai 3.60 reads request.headers in its exceptions: ragnb's hand-built errors carry the request openai's own client makes."
    import openai
    from ragnb.core.limits import error_kind, http_request
    url = 'http://127.0.0.1:9/v1/chat/completions'
    theirs = openai.DefaultHttpxClient().build_request('POST', url)
    assert type(http_request(url)) is type(theirs)
    for e, kind in [(openai.APIConnectionError(request=http_request(url)), 'connection'),
                    (openai.APITimeoutError(http_request(url)), 'timeout')]:
        assert error_kind(e) == kind and e.request.url == theirs.url


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
import json
from ragnb.app.cli import main

@pytest.fixture
def scripted_env(server, monkeypatch):
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model'}.items():
        monkeypatch.setenv(k, v)
    return server

# Issue 40, item 6 (hostile round 3): one request per key in flight ----------------------------------------------------
@pytest.mark.parametrize('concurrency', [1, 8])
def test_6_identical_calls_are_one_request_per_run(tmp_path, scripted_env, concurrency):
    "Two systems checked against the same ground truth: the ground truth's claims are asked for once, not twice."
    rows = [dict(query_id=f'{sys_}-{q}', query=f'Where is river {q}?', gt_answer=f'River {q} is in Africa. It is long.',
                 response=f'{sys_} says river {q} is somewhere.', retrieved_context=[{'doc_id': 'd', 'text': f'River {q}.'}])
            for q in range(4) for sys_ in ('a', 'b')]
    (tmp_path/'in.json').write_text(json.dumps({'results': rows}))
    assert main(['check', str(tmp_path/'in.json'), '--out', str(tmp_path/'out.json'),
                 '--concurrency', str(concurrency)]) == 0
    chat = [json.dumps(r['body'], sort_keys=True) for r in scripted_env.requests if r['path'].endswith('/chat/completions')]
    assert chat and len(chat) == len(set(chat)), f"{len(chat) - len(set(chat))} of {len(chat)} requests sent twice"
    got = {r['query_id']: r for r in json.loads((tmp_path/'out.json').read_text())['results']}
    for q in range(4):   # both systems got the ground-truth claims (the second from the call the first made)
        assert got[f'a-{q}']['gt_answer_claims'] and got[f'a-{q}']['gt_answer_claims'] == got[f'b-{q}']['gt_answer_claims']
