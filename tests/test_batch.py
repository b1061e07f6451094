"The provider's Batch API (ragnb.core.batch) and rate-limit-aware concurrency, against ragnb's scripted server."
import asyncio, json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from ragnb.core.llm import LLM, run_sync, Deadlines, Pacing, Retries
from ragnb.core.calls import Request
from ragnb.core.cache import CallCache
from ragnb.core.limits import RateLimiter
from ragnb.core.batch import BatchAPI, BatchJobs, submit
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path

def msg(t): return [{'role': 'user', 'content': t}]
REQS = [Request(msg(f'Say hello to number {i}'), prompt='greeting@1', id=f'q{i}') for i in range(12)]

def make(srv, path, **kw):
    return LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=path, progress=False,
               **{'retries': Retries(backoff=0.01), **kw})

def records(path):
    c = CallCache(path)
    return {k: json.loads(r) for k, r in c._conn().execute('SELECT key, record FROM calls')}

def online_calls(srv):
    return [q for q in srv.requests if q['path'].endswith('/chat/completions') and 'X-Ragnb-Batch' not in q['headers']]

def test_batch_mode_fills_the_same_cache_as_online(tmp_path, monkeypatch):
    monkeypatch.setenv('RAGNB_BATCH_POLL', '0.02')
    with ScriptedServer() as srv:
        rb = make(srv, tmp_path/'b'/'c.sqlite', batch=BatchAPI(poll=0.02)).batch(REQS)
        assert online_calls(srv) == [] and len(srv.batches) == 1
        ro = make(srv, tmp_path/'o'/'c.sqlite').batch(REQS)
        rm = make(srv, tmp_path/'m'/'c.sqlite').batch(REQS, mode=BatchAPI(poll=0.02))   # the per-call switch
    assert [(r.id, r.text, r.ok) for r in rb] == [(r.id, r.text, r.ok) for r in ro] == [(r.id, r.text, r.ok) for r in rm]
    assert records(tmp_path/'b'/'c.sqlite') == records(tmp_path/'o'/'c.sqlite')
    assert all(not r.cached and r.usage.calls == 1 for r in rb)

def test_the_client_takes_a_batch_runner_and_imports_none():
    "`ragnb.core.batch` builds on the client, not the other way round: the client runs whatever runner it is given."
    with pytest.raises(TypeError, match=r'BatchAPI\(\*\*options\)'): LLM(api_key='x', batch=True)
    with pytest.raises(TypeError, match=r'BatchAPI\(\*\*options\)'): LLM(api_key='x', batch={'poll': 1})
    with pytest.raises(ValueError, match='needs a batch runner'): LLM(api_key='x', cache=False).batch(REQS, mode='batch')
    seen = []
    async def runner(llm, requests, parse, desc): seen.append((len(list(requests)), desc)); return []
    assert LLM(api_key='x', cache=False, batch=runner).batch(REQS, desc='greetings') == [] and seen == [(12, 'greetings')]

def test_batch_discount_and_no_second_batch(tmp_path, monkeypatch):
    from ragnb.core.prices import PRICES
    monkeypatch.setitem(PRICES, 'scripted-test-model', (1.0, 2.0))
    with ScriptedServer() as srv:
        b, o = make(srv, tmp_path/'b.sqlite', batch=BatchAPI(poll=0.02)), make(srv, tmp_path/'o.sqlite')
        b.batch(REQS); o.batch(REQS)
        assert b.usage.cost == pytest.approx(o.usage.cost / 2) and b.usage.cost > 0
        assert all(r.cached for r in b.batch(REQS)) and len(srv.batches) == 1

def test_partly_failed_batch_goes_through_the_online_retry_path(tmp_path):
    with ScriptedServer(batch_faults={'500': 0.4}) as srv:
        rs = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(poll=0.02)).batch(REQS)
        (b,) = srv.batches.values()
        failed = b['request_counts']['failed']
        assert 0 < failed < len(REQS)
        assert len(online_calls(srv)) == failed       # exactly the failed lines, online
    assert all(r.ok for r in rs)

def test_batch_failures_that_fail_online_too_are_recorded(tmp_path):
    with ScriptedServer(batch_faults={'400': 1.0}, faults={'400': 1.0}) as srv:
        rs = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(poll=0.02)).batch(REQS[:3])
    assert [r.failure.kind for r in rs] == ['bad_request'] * 3

@pytest.mark.parametrize('on_expired, batches, online', [('resubmit', 2, 0), ('online', 1, 8)])
def test_expired_batch(tmp_path, on_expired, batches, online):
    with ScriptedServer(expire_after=4) as srv:
        rs = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(poll=0.02, on_expired=on_expired)).batch(REQS)
        assert [b['status'] for b in srv.batches.values()] == ['expired'] + ['completed'] * (batches - 1)
        assert len(online_calls(srv)) == online
    assert all(r.ok for r in rs)

def test_a_lost_batch_is_resubmitted(tmp_path):
    "A job whose batch the endpoint no longer knows (a restarted server): its requests are sent again."
    with ScriptedServer() as srv:
        l = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(poll=0.02))
        (job,) = run_sync(submit(l, {l.key_of(r): r for r in REQS}, BatchJobs(tmp_path/'batches')))
        srv.batches.clear()
        rs = l.batch(REQS)
    assert all(r.ok for r in rs)

def test_batch_needs_a_cache(tmp_path):
    with ScriptedServer() as srv:
        with pytest.raises(ValueError, match='call cache'): make(srv, None, cache=False, batch=BatchAPI()).batch(REQS)
        with pytest.raises(ValueError, match='mode'): make(srv, tmp_path/'c.sqlite').batch(REQS, mode='fast')

DOC_EN = """# Rate limits

The API enforces rate limits on requests per minute and tokens per minute for every organization.
A request that exceeds the limit is answered with status code 429 and a Retry-After header.
"""
DOC_DE = """# Vektordatenbanken

Eine Vektordatenbank speichert Einbettungen als Vektoren mit vielen Dimensionen.
Der Index HNSW ist ein Graph, der die Suche auch bei Millionen von Einträgen schnell macht.
"""

def _generate(srv, tmp_path, cache, out, batch):
    env = {**os.environ, 'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
           'RAGNB_CACHE_DIR': str(cache), 'RAGNB_BATCH_POLL': '0.05'}
    cmd = [sys.executable, '-c', 'from ragnb.app.cli import main; raise SystemExit(main())', 'generate', str(tmp_path/'docs'),
           '--out', str(out), '--keep-all', '--min-score', '1', '--concurrency', '4'] + (['--batch'] if batch else [])
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def test_generate_batch_equals_online_and_resumes_after_a_kill(tmp_path):
    docs = tmp_path/'docs'; docs.mkdir()
    (docs/'limits.md').write_text(DOC_EN); (docs/'de.md').write_text(DOC_DE)
    with ScriptedServer(batch_latency=0.3) as srv:
        p = _generate(srv, tmp_path, tmp_path/'cb', tmp_path/'batch.jsonl', batch=True)
        jobs, t0 = tmp_path/'cb'/'batches', time.time()
        while not any(json.loads(f.read_text())['status'] == 'submitted' for f in jobs.glob('*.json')):
            assert p.poll() is None and time.time() - t0 < 60, p.communicate()
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL); p.wait()
        (killed,) = [json.loads(f.read_text()) for f in jobs.glob('*.json')]
        assert not (tmp_path/'batch.jsonl').exists()
        out, err = _generate(srv, tmp_path, tmp_path/'cb', tmp_path/'batch.jsonl', batch=True).communicate()
        assert 'resuming Batch API job' in out + err, err
        made = [b['id'] for b in srv.batches.values()]
        assert online_calls(srv) == []
        o = _generate(srv, tmp_path, tmp_path/'co', tmp_path/'online.jsonl', batch=False); o.communicate()
        assert o.returncode == 0
    done = BatchJobs(jobs).all()
    assert made.count(killed['batch_id']) == 1 and sorted(j['batch_id'] for j in done) == sorted(made)
    assert all(j['status'] == 'done' for j in done) and len(made) >= 2   # questions, then critiques
    assert (tmp_path/'batch.jsonl').read_text() == (tmp_path/'online.jsonl').read_text() != ''

def test_check_and_parse_in_batch_mode_equal_online(tmp_path):
    from ragnb.check.checker import run_checks, load_results
    from ragnb.docs.pdf import parse_pdf
    data = sample_path('ragchecker', 'examples', 'checking_inputs.json')
    eu = sample_path('documents', 'camelot', 'tests', 'files', 'tabula', 'icdar2013-dataset', 'competition-dataset-eu', 'eu-004.pdf')
    with ScriptedServer() as srv:
        runs = {m: run_checks(load_results(data), make(srv, tmp_path/m/'c.sqlite', batch=m == 'b' and BatchAPI(poll=0.02)))
                for m in 'bo'}
        pages = {m: parse_pdf(eu, tmp_path/m/'parsed', make(srv, tmp_path/m/'c.sqlite', batch=m == 'b' and BatchAPI(poll=0.02)),
                              pages=[2, 3], page_zoom=0.5, crop_zoom=0.5) for m in 'bo'}
        assert len(srv.batches) >= 3   # extraction, checking, pages
    assert runs['b'].scores.overall == runs['o'].scores.overall
    assert [r.response_claims for r in runs['b'].results] == [r.response_claims for r in runs['o'].results]
    assert [p.markdown for p in pages['b'].pages] == [p.markdown for p in pages['o'].pages]

# --- rate limits

def test_rate_limit_headers_prevent_a_429_storm(tmp_path):
    def run(adaptive):
        with ScriptedServer(latency=0.01, rate_limits={'requests': 10, 'window': 0.5}) as srv:
            rs = make(srv, None, cache=False, pacing=Pacing(concurrency=8, adaptive=adaptive), retries=Retries(backoff=0.01, max_retries=8)).batch([msg(f'q{i}') for i in range(40)])
            return sum(r.ok for r in rs), sum(q['fault'] == '429' for q in srv.requests), srv
    ok, n429, srv = run(True)
    _, storm, _ = run(False)   # the same run with the headers ignored
    # next to none: only calls in flight when a window turns over may meet a 429 (0-4 seen on a loaded machine)
    assert ok == 40 and n429 <= 8 and storm > 20 and storm > 10 * n429

def test_token_budget_from_headers(tmp_path):
    def run(adaptive):
        with ScriptedServer(latency=0.01, rate_limits={'tokens': 400, 'window': 0.5}) as srv:
            rs = make(srv, None, cache=False, pacing=Pacing(concurrency=8, adaptive=adaptive), retries=Retries(backoff=0.01, max_retries=8)).batch(
                [msg(f'question number {i} ' * 5) for i in range(30)])
            return sum(r.ok for r in rs), sum(q['fault'] == '429' for q in srv.requests)
    ok, n429 = run(True)
    # the calls already in flight when a window's budget runs out may meet a 429 (one in a few runs on a loaded
    # machine, as the window turns over between a reply's headers and the next send): a few, never a storm
    assert ok == 30 and n429 <= 8   # at most the calls in flight (concurrency 8)
    assert run(False)[1] > 3 * max(n429, 1)   # the same run with the headers ignored

def test_speeds_up_to_the_ceiling_when_headers_show_room(tmp_path):
    with ScriptedServer(latency=0.05, rate_limits={'requests': 10_000, 'window': 60}) as srv:
        l = make(srv, None, cache=False, pacing=Pacing(concurrency=4, max_concurrency=12))
        l.batch([msg(f'q{i}') for i in range(200)])
    assert l.limiter.stats['highest'] > 4 and srv.max_inflight > 4 and srv.max_inflight <= 12

def test_without_headers_concurrency_stays_put(tmp_path):
    with ScriptedServer(latency=0.02) as srv:
        l = make(srv, None, cache=False, pacing=Pacing(concurrency=4))
        l.batch([msg(f'q{i}') for i in range(40)])
    assert srv.max_inflight == 4 and l.limiter.stats['highest'] == 4

def test_tpm_budget_paces_calls():
    lim = RateLimiter(concurrency=4, tpm=6000)   # 100 tokens a second; the bucket starts full
    async def go():
        await lim.acquire(6000); await lim.release(6000, 6000)
        t = time.monotonic(); await lim.acquire(50); return time.monotonic() - t
    assert 0.4 < asyncio.run(go()) < 3   # waited for the refill (0.5 s), not forever; generous above for a loaded machine

def test_a_429_halves_concurrency_and_pauses():
    lim = RateLimiter(concurrency=8)
    lim.observe({}, 429, 0.3)
    assert lim.limit == 4 and 0.1 < lim.wait_time() <= 0.3   # the pause runs from the 429: some of it may pass on a busy machine

# --- the two transports

def test_typed_and_fast_paths_give_the_same_results(tmp_path):
    with ScriptedServer(faults={'429': 0.1, '500': 0.1}, seed=3) as srv:
        rf = make(srv, tmp_path/'f.sqlite', retries=Retries(backoff=0.01, max_retries=8)).batch(REQS)
        rt = make(srv, tmp_path/'t.sqlite', retries=Retries(backoff=0.01, max_retries=8), fast=False).batch(REQS)
        ua = {v for q in online_calls(srv) for k, v in q['headers'].items() if k.lower() == 'user-agent'}
    assert [r.text for r in rf] == [r.text for r in rt] and all(r.ok for r in rf)
    assert records(tmp_path/'f.sqlite') == records(tmp_path/'t.sqlite')
    assert any('aiohttp' in u for u in ua) and any('OpenAI' in u for u in ua)

def test_fast_path_timeouts_and_connection_errors_are_classified(tmp_path):
    with ScriptedServer(faults={'timeout': 1.0}, hang=1.0) as srv:
        r = make(srv, None, cache=False, deadlines=Deadlines(total=0.2), retries=Retries(backoff=0.01, max_retries=0)).call(msg('hi'))
    assert r.failure.kind == 'timeout'
    r = LLM(base_url='http://127.0.0.1:9/v1', api_key='k', cache=False, retries=Retries(max_retries=0)).call(msg('hi'))
    assert r.failure.kind == 'connection'

CACHE_WRITER = """
import sys
from ragnb.core.cache import CallCache
c = CallCache(sys.argv[1])
for i in range(50): c.put(f'{sys.argv[2]}-{i}', {'text': 'x' * 100})
"""

def test_call_cache_from_several_processes(tmp_path):
    ps = [subprocess.Popen([sys.executable, '-c', CACHE_WRITER, str(tmp_path/'c.sqlite'), f'w{i}']) for i in range(4)]
    assert [p.wait() for p in ps] == [0] * 4
    assert len(CallCache(tmp_path/'c.sqlite')) == 200

def test_cached_and_replay_runs_make_no_batch(tmp_path):
    with ScriptedServer() as srv:
        make(srv, tmp_path/'c.sqlite').batch(REQS)           # an online run fills the cache
        rs = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(poll=0.02)).batch(REQS)
        rp = make(srv, tmp_path/'c.sqlite', batch=BatchAPI(), replay=True).batch(REQS + [Request(msg('never asked'), id='new')])
        assert srv.batches == {} and srv.files == {}
    assert all(r.cached for r in rs) and not (tmp_path/'batches').exists()
    assert rp[-1].failure.kind == 'replay_miss' and all(r.ok for r in rp[:-1])

def test_a_call_larger_than_the_token_budget_still_runs(tmp_path):
    with ScriptedServer(latency=0.01, rate_limits={'tokens': 10_000, 'window': 0.3}) as srv:
        l = make(srv, None, cache=False, pacing=Pacing(concurrency=2), retries=Retries(backoff=0.01, max_retries=6))
        assert l.call(msg('short')).ok                       # the headers now say the budget is 10,000 tokens a window
        l.limiter.tokens.left = 0                              # spent, as if other calls had used it
        t = time.monotonic(); r = l.call(msg('word ' * 20_000))   # ~25,000 tokens: more than a whole window allows
    # it goes out after each refill instead of waiting forever, and the server's 429s end as a recorded failure
    assert r.failure.kind == 'rate_limit' and r.attempts == 7 and time.monotonic() - t < 20


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it

# Issue 40, item 1 (hostile round 3): a Batch API reply that echoes the key is stored redacted -------------------------
def test_1_a_batch_reply_that_echoes_the_key_is_stored_without_it(tmp_path, monkeypatch):
    from ragnb.core.batch import BatchAPI
    from ragnb.core.llm import LLM, Retries
    from ragnb.core.calls import Request
    key = 'sk-proj-Zx81secretvalue1234567890'
    monkeypatch.setenv('RAGNB_BATCH_POLL', '0.02')
    reqs = [Request([{'role': 'user', 'content': f'Say hello to {i}'}], prompt='greeting@1', id=f'q{i}') for i in range(3)]
    with ScriptedServer(rules={'greeting': lambda call, rng: f'Hello! You sent Authorization: Bearer {key}.'}) as srv:
        llm = LLM(base_url=srv.base_url, api_key=key, model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  progress=False, retries=Retries(backoff=0.01), batch=BatchAPI(poll=0.02))
        got = llm.batch(reqs)
        assert len(srv.batches) == 1                                         # it went through the Batch API
    assert all(r.ok and '[redacted]' in r.text and key not in r.text for r in got)
    stored = b''.join(p.read_bytes() for p in tmp_path.rglob('*') if p.is_file())
    assert key.encode() not in stored and b'[redacted]' in stored           # calls.sqlite, batch job files

# Issue 40, item 12 (hostile round 3): bad Batch API files and lines ---------------------------------------------------
def test_12_bad_batch_files_and_lines_are_skipped_and_the_run_goes_on(tmp_path, monkeypatch):
    import time, warnings
    from ragnb.core.batch import BatchAPI, BatchJobs, submit
    from ragnb.core.llm import LLM, Retries, run_sync
    from ragnb.core.calls import Request
    monkeypatch.setenv('RAGNB_BATCH_POLL', '0.02')
    reqs = [Request([{'role': 'user', 'content': f'Say hello to {i}'}], prompt='greeting@1', id=f'q{i}') for i in range(6)]
    jobs = BatchJobs(tmp_path/'batches')
    jobs.folder.mkdir()
    (jobs.folder/'broken.json').write_text('{"job": "x", ')                  # a half-written or foreign file
    (jobs.folder/'other.json').write_bytes(b'\xff\xfe not utf-8')
    (jobs.folder/'list.json').write_text('[1, 2]')
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  progress=False, retries=Retries(backoff=0.01), batch=BatchAPI(poll=0.02))
        (job,) = run_sync(submit(llm, {llm.key_of(r): r for r in reqs}, jobs))
        t0 = time.time()
        while srv.batches[job['batch_id']]['status'] != 'completed' and time.time() - t0 < 30: time.sleep(0.05)
        out = srv.files[srv.batches[job['batch_id']]['output_file_id']]
        lines = out['data'].split(b'\n')
        good = [json.loads(l) for l in lines[:2]]
        bad = [b'not json at all', b'\xff\xfe\x00', json.dumps({'response': {'status_code': 200}}).encode(),  # no id
               json.dumps({'custom_id': json.loads(lines[2])['custom_id'], 'response': 'OK'}).encode(),
               json.dumps({**json.loads(lines[3]), 'response': {**json.loads(lines[3])['response'], 'body': {
                   **json.loads(lines[3])['response']['body'], 'usage': {'prompt_tokens': '12', 'completion_tokens': 'x'}}}}).encode(),
               b'[1, 2, 3]']
        out['data'] = b'\n'.join([json.dumps(g).encode() for g in good] + bad) + b'\n'
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter('always')
            got = llm.batch(reqs)                                                # resumes the job, collects it
        online = [q for q in srv.requests if q['path'].endswith('/chat/completions') and 'X-Ragnb-Batch' not in q['headers']]
        assert all(r.ok for r in got) and len(online) == 3                      # 2 + 1 from the batch, 3 asked online
        said = ' '.join(str(w.message) for w in seen)
        assert 'unreadable line(s) skipped' in said and 'not JSON' in said and 'not UTF-8' in said
        assert all(f in said for f in ('broken.json', 'other.json', 'list.json'))   # each bad job file named
        done = [j for j in jobs.all() if j['job'] == job['job']][0]
        assert done['status'] == 'done' and done['skipped_lines']
        n = len(srv.requests)
        llm.batch(reqs)                                                          # nothing resumed, nothing sent
        assert len(srv.requests) == n and not srv.batches.keys() - {job['batch_id']}

# Issue 40, item 13 (hostile round 3): writers that meet on a new call cache -------------------------------------------
WRITER = '''
import sys, time
from ragnb.core.cache import CallCache, Exchange
start = float(sys.argv[3])
while time.time() < start: pass          # every writer opens the new file at the same moment
c = CallCache(sys.argv[1]); who = sys.argv[2]
for i in range(int(sys.argv[4])):
    c.put(f"{who}-{i}", {"text": "x" * 2000, "i": i}, "chat", "m", "p@1")
    c.put_trace(Exchange(item_id=f"{who}/{i}", key=f"{who}-{i}", prompt="p@1", model="m",
                         messages=[{"role": "user", "content": "q" * 500}], params={}, source="live", reply="x",
                         endpoint="e", run=who, time=time.time()))
print(len(c.errors))
'''

@pytest.mark.parametrize('trial', range(6))
def test_13_writers_opening_one_new_cache_at_once_all_get_their_rows_in(tmp_path, trial):
    "Before: 'cannot be opened (database is locked)' for about one writer in eight (the switch to WAL, the first table)."
    import time
    from ragnb.core.cache import CallCache
    path, n, rows = tmp_path/'calls.sqlite', 4, 40 if trial else 300
    t = time.time() + 2
    procs = [subprocess.Popen([sys.executable, '-c', WRITER, str(path), f'w{k}', str(t), str(rows)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0 and so.strip() == '0', se[-2000:]   # no 'database is locked', no write kept in memory
    c = CallCache(path)
    assert len(c) == n * rows and len(c.traces(prefix='w')) == n * rows
