"Traces of model exchanges: recorded per item (retries, failures), persisted with the call cache, shown step by step and by `ragnb show`."
import base64, hashlib, json, re, sqlite3, zlib
from collections import defaultdict
from pathlib import Path
import pytest
from ragnb.app.cli import main
from ragnb.core.llm import LLM, Deadlines, Retries
from ragnb.core.calls import Request, text_part, image_part
from ragnb.core.cache import cache_key
from ragnb.testing.scripted import ScriptedServer
from ragnb.docs.documents import load_documents
from ragnb.synth.generate import generate_dataset, Dataset
from ragnb.view.trace import (TraceViewer, chain_exchanges, checking_trace, generation_steps, generation_trace, parsing_trace,
                         show, tracer)

def msg(t): return [{'role': 'user', 'content': t}]

DOCS = {
    'rivers.md': "# Rivers\n\nThe Nile is the longest river in Africa and flows north into the Mediterranean Sea.\n\n"
                 "The Amazon carries more water than any other river in the world, about 209,000 cubic metres a second.\n\n"
                 "The Danube flows through ten countries, more than any other river in Europe.\n",
    'api.md': "# The API\n\nThe Batch API returns results within 24 hours at half the price of synchronous requests.\n\n"
              "Structured Outputs ensures that replies follow the JSON Schema you supply.\n",
    'script.md': "# Script\n\n```bash\nset -euo pipefail\nfor f in *.md; do\n  wc -l \"$f\"\ndone\n```\n",
}

@pytest.fixture
def docs(tmp_path):
    d = tmp_path/'docs'; d.mkdir()
    for name, text in DOCS.items(): (d/name).write_text(text)
    return load_documents(d)

def _conn(path): return sqlite3.connect(path)

def _stored_text(path:Path) -> str:
    "Everything a cache file holds as text: its raw bytes (and WAL), request bodies decompressed, trace records."
    raw = b''.join(p.read_bytes() for p in path.parent.glob(path.name + '*'))
    c = _conn(path)
    bodies = [zlib.decompress(b).decode() for (b,) in c.execute('SELECT body FROM requests')]
    recs = [r for (r,) in c.execute('SELECT record FROM traces')] + [r for (r,) in c.execute('SELECT record FROM calls')]
    return raw.decode('latin-1') + '\n'.join(bodies + recs)

# --- the LLM layer ---------------------------------------------------------------------------------------------------

def test_every_item_traced_with_its_attempts_and_errors(tmp_path):
    kinds = {'429': 'rate_limit', '500': 'server_error', 'timeout': 'timeout'}
    with ScriptedServer(faults={'429': 0.2, '500': 0.2, 'timeout': 0.05}, seed=4, hang=2.5) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  deadlines=Deadlines(total=1.2), retries=Retries(max_retries=2, backoff=0.01), progress=False)
        want_int = lambda t: int(t)  # the scripted default reply is prose: every successful call is a parse failure
        reqs = [Request(msg(f'question number {i}'), id=f'q{i}', parse=want_int if i % 5 == 0 else None) for i in range(60)]
        rs = llm.batch(reqs)
    sent = defaultdict(list)  # item -> the faults the server drew for each of its requests, in order
    for q in srv.requests: sent[q['body']['messages'][0]['content']].append(q['fault'])
    assert {r.failure.kind for r in rs if not r.ok} >= {'parse'} and any(r.attempts > 1 and r.ok for r in rs)
    assert any(not r.ok and r.failure.kind != 'parse' for r in rs)
    for i, r in enumerate(rs):
        ex = r.trace
        assert (ex.item_id, ex.source, ex.attempts, ex.messages) == (f'q{i}', 'live', r.attempts, reqs[i].messages)
        faults = sent[f'question number {i}']
        assert len(faults) == ex.attempts
        assert [e['kind'] for e in ex.errors] == [kinds[f] for f in faults if f]  # each failed attempt, as the server failed it
        assert [e['attempt'] for e in ex.errors] == [k + 1 for k, f in enumerate(faults) if f]
        if r.ok: assert ex.reply == r.text and ex.finish_reason == 'stop' and ex.failure is None and ex.prompt_tokens > 0
        else: assert ex.failure == {'kind': r.failure.kind, 'message': r.failure.message}
        if not r.ok and r.failure.kind == 'parse':
            assert ex.reply == r.text and ex.parsed is None and 'ValueError' in ex.failure['message']
        assert llm.trace_for(f'q{i}') == [ex]

def test_traces_read_back_by_a_new_llm_on_the_same_cache(tmp_path):
    with ScriptedServer(faults={'500': 0.3}, seed=3) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  retries=Retries(max_retries=1, backoff=0.01), progress=False)
        rs = llm.batch([Request(msg(f'hello {i}'), prompt='greet@2', id=f'h{i}', parse=lambda t: {'n': len(t)}) for i in range(20)])
    assert any(not r.ok for r in rs) and any(r.ok for r in rs)
    later = LLM(base_url='http://127.0.0.1:9/v1', cache_path=tmp_path/'c.sqlite', progress=False)  # no server behind it
    for r in rs:
        assert later.trace_for(r.id) == [r.trace]  # every field: request, reply, tokens, errors, parse result, run, time
    # a stored request hashes back to its cache key: it is the request that was sent
    c = _conn(tmp_path/'c.sqlite')
    for key, body in c.execute('SELECT key, body FROM requests'):
        b = json.loads(zlib.decompress(body))
        assert cache_key(b['endpoint'], b['model'], b['messages'], b['params'], b['prompt']) == key
    assert c.execute('SELECT COUNT(*) FROM requests').fetchone()[0] == len(rs)

def test_replay_shows_the_exchange_and_writes_nothing(tmp_path):
    path = tmp_path/'c.sqlite'
    with ScriptedServer() as srv:
        rec = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=path, progress=False)
        first = rec.call(msg('Say hello'), prompt='greet@1', item_id='a')
        rec.cache.checkpoint()
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        rp = LLM(base_url=srv.base_url, model='scripted-test-model', cache_path=path, replay=True, progress=False)
        n = len(srv.requests)
        again = rp.call(msg('Say hello'), prompt='greet@1', item_id='a')
        assert len(srv.requests) == n  # no live call
    assert (again.trace.source, again.trace.reply, again.trace.messages) == ('replayed', first.text, msg('Say hello'))
    assert (again.trace.prompt_tokens, again.trace.finish_reason) == (first.trace.prompt_tokens, 'stop')
    rp.cache.checkpoint()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before

def test_a_cache_from_before_traces_gets_its_requests(tmp_path):
    path = tmp_path/'c.sqlite'
    with ScriptedServer() as srv:
        old = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=path, progress=False)
        old.tracing = False
        old.call(msg('an old question'), item_id='old')
        assert old.trace_for('old') == [] and 'requests' not in {t for (t,) in _conn(path).execute("SELECT name FROM sqlite_master")}
        new = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=path, progress=False)
        n = len(srv.requests)
        r = new.call(msg('an old question'), item_id='old')
        assert r.cached and len(srv.requests) == n
    back = LLM(cache_path=path, progress=False).trace_for('old')
    assert [(e.source, e.messages, e.reply) for e in back] == [('cached', msg('an old question'), r.text)]

def test_no_api_key_and_no_image_bytes_in_the_cache(tmp_path):
    key = 'sk-test-' + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:24]
    png = (Path(__file__).parent/'browser'/'screenshots').glob('*.png')
    img = next(png, None)
    data = img.read_bytes() if img else base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==')
    with ScriptedServer(faults={'500': 0.3}, seed=1) as srv:
        llm = LLM(base_url=srv.base_url, api_key=key, model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                  retries=Retries(max_retries=1, backoff=0.01), progress=False)
        reqs = [Request(msg(f'question {i}'), id=f'q{i}') for i in range(10)]
        reqs.append(Request([{'role': 'user', 'content': [text_part('Parse this page.'), image_part(data)]}], id='page'))
        rs = llm.batch(reqs)
    assert all({k.lower(): v for k, v in q['headers'].items()}.get('authorization') == f'Bearer {key}' for q in srv.requests)  # the key was used...
    stored = _stored_text(tmp_path/'c.sqlite')
    assert key not in stored  # ...and written nowhere
    b64 = base64.b64encode(data).decode()
    assert b64[:60] not in stored and rs[-1].trace.messages[0]['content'][1]['sha256'] == hashlib.sha256(data).hexdigest()

# --- chains and `ragnb show` ------------------------------------------------------------------------------------------

@pytest.fixture
def dataset(docs, llm, tmp_path):
    ds = generate_dataset(docs, llm)
    assert ds.counts()['kept'] >= 1 and ds.counts()['dropped'] >= 1
    return ds, ds.save(tmp_path/'qa.jsonl')

def test_show_a_dataset_row(dataset, llm, capsys):
    ds, path = dataset
    for _, row in ds.df.iterrows():
        assert main(['show', str(path), row.id, '--cache', str(llm.cache.path)]) == 0
        out = capsys.readouterr().out
        gen = llm.trace_for(row.id)[-1]
        assert 'factoid_qa@1' in out and 'Factoid question: (your factoid question)' in out  # the prompt as sent
        assert all(l.strip() in out for l in gen.reply.splitlines())  # the raw reply, line by line
        for f in ('question', 'answer', 'evidence'): assert f"{f}: {row[f]}" in out  # the parsed fields
        for c in ('groundedness', 'relevance', 'standalone'):  # the three critiques: prompt, raw reply, rating, rationale
            crit = llm.trace_for(f'{row.id}/{c}')[-1]
            assert f'critique_{c}@1' in out and f"rating: {row[c + '_score']}/5" in out and f"rationale: {row[c + '_eval']}" in out
            assert crit.reply.strip().splitlines()[-1].strip() in out
        assert ('== decision · kept' in out) == bool(row.kept)
        if not row.kept: assert 'below the threshold' in out or 'near-duplicate' in out

def test_show_shortens_unless_full(dataset, llm):
    "By default a prompt leaves out the passage shown above it; --full prints every prompt as it was sent."
    ds, path = dataset
    row = ds.df.iloc[0]
    line = max(row.context.splitlines(), key=len)
    short, full = show(path, row.id, llm.cache.path), show(path, row.id, llm.cache.path, full=True)
    assert short.count('[the passage, ') == 2 and '[the passage, ' not in full  # the factoid and the groundedness prompts
    assert full.count(line) == short.count(line) + 2

def test_show_needs_the_right_cache(dataset, tmp_path, capsys):
    ds, path = dataset
    empty = LLM(cache_path=tmp_path/'empty.sqlite').cache.path
    assert main(['show', str(path), ds.df.id[0], '--cache', str(empty)]) == 1
    assert 'no exchange found' in capsys.readouterr().err
    assert main(['show', str(path), ds.df.id[0], '--cache', str(tmp_path/'missing.sqlite')]) == 1
    assert 'no call cache at' in capsys.readouterr().err
    assert main(['show', str(path), 'no/such/row', '--cache', str(empty)]) == 1
    assert 'no item' in capsys.readouterr().err

def test_chain_picks_the_run_that_made_the_row(docs, tmp_path, server):
    "The same item ids in two runs over different passages: each dataset's rows show their own exchanges."
    path = tmp_path/'shared.sqlite'
    mk = lambda: LLM(base_url=server.base_url, api_key='sk-test', model='scripted-test-model', cache_path=path, progress=False)
    a = generate_dataset(docs, mk(), chunk_size=3000)
    b = generate_dataset(docs, mk(), chunk_size=120, chunk_overlap=0)  # other passages under ids that overlap a's
    shared = set(a.df.id) & set(b.df.id)
    assert shared
    for ds in (a, b):
        for _, row in ds.df[ds.df.id.isin(shared)].iterrows():
            exs = chain_exchanges(generation_steps(row, path))
            assert exs[0].parsed['question'] == row.question and row.context in exs[0].request_text()

def test_replayed_dataset_chain_without_a_live_call(docs, llm, server):
    ds = generate_dataset(docs, llm)
    n = len(server.requests)
    rp = LLM(base_url=llm.base_url, model=llm.model, cache_path=llm.cache.path, replay=True, progress=False)
    again = generate_dataset(docs, rp)
    assert len(server.requests) == n and rp.usage.calls == 0
    exs = [e for i in range(len(again.df)) for e in chain_exchanges(generation_trace(again, rp).steps(i))]
    assert len(exs) == 4 * len(again.df) and {e.source for e in exs} == {'replayed'}
    assert all(e.reply and e.request_text() for e in exs)

def test_model_text_is_escaped(docs, tmp_path):
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)>'
    rules = {'factoid_qa': lambda m, rng: f"Output:::\nFactoid question: What is {evil}?\nAnswer: {evil}\nEvidence: {evil}"}
    with ScriptedServer(rules=rules) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite', progress=False)
        ds = generate_dataset(docs, llm)
    st = generation_trace(ds, llm)
    for i in range(len(ds)):
        h = st.html(i)
        assert '<script' not in h and '<img src=x' not in h and '&lt;script&gt;' in h

def test_viewer_is_a_thin_view_over_its_state(dataset, llm):
    ds, _ = dataset
    tv = TraceViewer(generation_trace(ds, llm))
    first = tv.view.body.value
    tv.view.next.click()
    assert tv.state.stepper.i == 1 and tv.state.html(1) in tv.view.body.value and tv.view.body.value != first
    b = tv._repr_mimebundle_()
    assert tv.state.html() in b['text/html'] and 'application/vnd.jupyter.widget-view+json' in b
    assert '<details' in b['text/html'] and 'scripted-test-model (scripted)' in b['text/html']

# --- checking and page parsing ----------------------------------------------------------------------------------------

RESULT = {'query_id': 'r1', 'query': 'Which river is the longest?',
          'gt_answer': 'The Nile is the longest river in Africa. It flows into the Mediterranean Sea.',
          'response': 'The Nile is the longest river. It flows into the Red Sea.',
          'retrieved_context': [{'doc_id': 'a', 'text': 'The Nile is the longest river in Africa.'},
                                {'doc_id': 'b', 'text': 'The Nile flows north into the Mediterranean Sea.'}]}

def test_checking_chain_and_show(llm, tmp_path, capsys):
    from ragnb.check.checker import run_checks
    out = tmp_path/'checked.json'
    run = run_checks([dict(RESULT)], llm, out=out)
    st = checking_trace(run, llm)
    exs = chain_exchanges(st.steps())
    assert len(exs) == int(run.usage.calls.sum())  # every call of the run is in the chain
    assert [e.prompt_name for e in exs[:2]] == ['extract_claims_triplet'] * 2
    assert {e.prompt_name for e in exs[2:]} <= {'check_claims', 'repair_json'}
    titles = [s.title for s in st.steps()]
    assert titles == ['response and ground truth', 'claims of the response', 'claims of the ground truth',
                      'check against the ground-truth answer', 'check against the response', 'check against retrieved chunk 0',
                      'check against retrieved chunk 1', 'labels and roles', 'metrics']
    tv = TraceViewer(st)
    tv.metrics.value = True
    assert tv.metrics_box.children[0] is tv._mv.view.box
    assert main(['show', str(out), 'r1', '--cache', str(llm.cache.path)]) == 0
    text = capsys.readouterr().out
    assert 'extract_claims_triplet@1' in text and 'check_claims@1' in text and 'Mediterranean' in text
    assert re.search(r'R\d .*: (Entailment|Neutral|Contradiction)', text)

def _table_pdf(path:Path) -> Path:
    "A one-page PDF with a sentence and a drawn 5 x 4 table: one region for page parsing."
    import pymupdf
    doc = pymupdf.open(); pg = doc.new_page()
    pg.insert_text((72, 72), "Retail trade across the member states, 1995.", fontsize=11)
    for r in range(5):
        for c in range(4):
            rect = pymupdf.Rect(72 + c*90, 100 + r*20, 72 + (c+1)*90, 100 + (r+1)*20)
            pg.draw_rect(rect, color=(0, 0, 0), width=0.5)
            pg.insert_text((rect.x0 + 4, rect.y1 - 6), f"{r}.{c}", fontsize=9)
    doc.save(path)
    return path

def test_page_chain_and_show(tmp_path, capsys):
    from ragnb.docs.pdf import parse_pdf
    pdf = _table_pdf(tmp_path/'table.pdf')
    bad = '<table onclick="alert(1)"><tr><td>1<script>alert(2)</script></td></tr></table>'
    with ScriptedServer(rules={'pdf_page': lambda m, rng: f"## Page\n\n{bad}\n\n![](nothing.png)"}) as srv:
        vl = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=tmp_path/'p.sqlite', progress=False)
        parsed = parse_pdf(pdf, tmp_path/'out', llm=vl, page_zoom=1, crop_zoom=1)
    steps = parsing_trace(parsed, vl).steps()
    assert steps[0].fields['sent to the model'] == 'yes: the file on disk is the image sent'
    assert '[image sha256:' in steps[1].text and steps[2].text.startswith('## Page')
    assert [s.title for s in steps[3:]] == ['tables', 'crops', 'page as written'] and steps[3].note == '1 sanitised'
    h = parsing_trace(parsed, tmp_path/'p.sqlite').html()
    assert 'onclick="' not in h and '<script' not in h and '&lt;script&gt;' in h  # the raw reply escaped, the table sanitised
    (tmp_path/'out'/parsed.pages[0].image).write_bytes(b'not the image that was sent')
    assert parsing_trace(parsed, tmp_path/'p.sqlite').steps()[0].fields['sent to the model'].startswith('no:')
    assert main(['show', str(tmp_path/'out'), '1', '--cache', str(tmp_path/'p.sqlite')]) == 0
    out = capsys.readouterr().out
    assert 'pdf_page@1' in out and 'no: the file on disk differs' in out and "image 'nothing.png' is not one of" in out

# --- memory and storage -----------------------------------------------------------------------------------------------

def test_memory_is_bounded_and_the_cache_keeps_every_trace(llm):
    llm.trace_memory = 5
    rs = llm.batch([Request(msg(f'question {i}'), id=f'q{i}') for i in range(12)])
    mem = llm.__dict__['_traces']
    ids = {f'q{i}' for i in range(12)}  # the 12 calls finish in any order (16 in flight): the last 5 to finish stay
    assert sum(map(len, mem.values())) == 5 and len(mem) == 5 and set(mem) <= ids
    assert all(llm.trace_for(r.id) == [r.trace] for r in rs)  # the older ones come back from the cache

def test_a_trace_that_cannot_be_stored_is_a_warning_not_a_failure(llm):
    llm.call(msg('first'), item_id='a')
    c = llm.cache._conn()
    c.execute("CREATE TRIGGER full BEFORE INSERT ON traces BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    with pytest.warns(UserWarning, match='traces not stored'):
        r = llm.call(msg('second'), item_id='b')
    assert r.ok and r.trace.reply == r.text and llm.trace_for('b') == [r.trace]


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it

def _inputs(path:Path, responses:dict):
    path.write_text(json.dumps({'results': [
        dict(query_id=q, query=f'What about {q}?', gt_answer='The Nile is in Africa.', response=resp,
             retrieved_context=[{'doc_id': 'd1', 'text': 'The Nile is a river in Africa.'}]) for q, resp in responses.items()]}))
    return path

# Issue 40, item 10 (hostile round 3): call caches read, not written, by `ragnb show` ----------------------------------
def _checked_run(tmp_path, server, monkeypatch):
    "A checked result and the cache it was made with (its calls and traces)."
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
    a = _inputs(tmp_path/'a.json', {'q1': 'The Nile is in Africa.'})
    assert main(['check', str(a), '--out', str(tmp_path/'out.json')]) == 0
    return tmp_path/'out.json', tmp_path/'cache'/'calls.sqlite'

def _state(folder:Path) -> dict:
    "The cache file's bytes and time, and which files the folder holds (a reader of a WAL file may touch its -shm)."
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) if p.suffix == '.sqlite' else None for p in folder.iterdir()}

def test_10_show_reads_a_cache_without_writing_and_names_a_damaged_one(tmp_path, server, monkeypatch, capsys):
    out, cache = _checked_run(tmp_path, server, monkeypatch)
    import gc, sqlite3
    gc.collect()   # the run's own connection closes now if nothing holds it, not in the middle of `show`
    con = sqlite3.connect(cache); con.execute('PRAGMA wal_checkpoint(TRUNCATE)'); con.close()   # as a run leaves it
    before = _state(cache.parent)
    capsys.readouterr()
    assert main(['show', str(out), 'q1', '--cache', str(cache)]) == 0
    assert 'claims of the response' in capsys.readouterr().out
    assert _state(cache.parent) == before   # nothing created or touched: works on read-only storage too
    data = bytearray(cache.read_bytes())
    size = int.from_bytes(data[16:18], 'big')   # SQLite's page size
    for page in range(1, len(data) // size):     # every page but the first (the schema) gets an invalid page type
        data[page * size] = 0
    cache.write_bytes(bytes(data))
    for f in cache.parent.glob('calls.sqlite-*'): f.unlink()
    assert main(['show', str(out), 'q1', '--cache', str(cache)]) == 1
    err = capsys.readouterr().err
    assert err.startswith('ragnb show: error: call cache ') and str(cache) in err and 'Traceback' not in err
    assert len(err.strip().splitlines()) == 1
