"Hostile input and faulty endpoints (issue 12): nothing silently wrong, nothing hangs, nothing unbounded."
import base64, io, json, os, re, socket, subprocess, sys, textwrap, threading, time, tracemalloc, zipfile
from html.parser import HTMLParser
from pathlib import Path

import mistune
import pandas as pd
import pymupdf
import pytest

from ragnb.app.cli import main
from ragnb.app.demo import sample_docs
from ragnb.docs.documents import Chunk, Document, Documents, LoadIssue, load_documents, load_folder, split_documents
from ragnb.synth.generate import QA, Critique, Dataset, generate_dataset
from ragnb.core.llm import LLM, Deadlines, Pacing, Retries
from ragnb.core.calls import Failure, Result
from ragnb.core.cache import cache_key
from ragnb.check.metrics import RAGResult, ResultError, load_results, score
from ragnb.docs.office import MAX_IMAGE_BYTES, docx_segments, parse_office, pptx_segments
from ragnb.docs.pages import DocumentError, ParsedDoc, ParsedPage, Segment
from ragnb.docs.pdf import parse_pdf
from ragnb.rag.retrieval import RETRIEVAL_METRICS, Relevance, RetrievalReport
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sample_path('documents')
RAGCHECKER = sample_path('ragchecker', 'examples')
GUIDE = sample_docs()/'what_makes_documentation_good.md'
needs_docs = pytest.mark.skipif(not DOCS.exists(), reason='sample documents not present (nbs/data)')


def msg(t): return [{'role': 'user', 'content': t}]

def make_llm(srv, tmp_path, **kw):
    return LLM(base_url=srv.base_url, api_key='sk-test', **{'model': 'scripted-test-model', 'cache_path': tmp_path/'c.sqlite',
               'progress': False, 'retries': Retries(backoff=0.01), **kw})

def use_endpoint(monkeypatch, url):
    "The environment of a user running ragnb's commands against `url`."
    monkeypatch.setenv('OPENAI_BASE_URL', url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')

def closed_port() -> int:
    "A local port nothing listens on: connecting is refused at once."
    s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
    return port

def png_bytes(w=40, h=30) -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, w, h), False); pix.clear_with(180)
    return pix.tobytes('png')

def repack(src:Path, dst:Path, media:bytes) -> Path:
    "Copy the zip package `src` to `dst` with every picture's bytes replaced by `media` (deflated)."
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, 'w', zipfile.ZIP_DEFLATED) as zout:
        for i in zin.infolist(): zout.writestr(i.filename, media if '/media/' in i.filename else zin.read(i))
    return dst

def docx_with_picture(path:Path) -> Path:
    import docx
    d = docx.Document(); d.add_heading('Report', 1); d.add_paragraph('The revenue grew by four per cent in 2023.')
    d.add_picture(io.BytesIO(png_bytes())); d.add_paragraph('The end.'); d.save(path)
    return path

def pptx_with_picture(path:Path) -> Path:
    import pptx
    prs = pptx.Presentation(); s = prs.slides.add_slide(prs.slide_layouts[5]); s.shapes.title.text = 'Revenue'
    s.shapes.add_picture(io.BytesIO(png_bytes()), 0, 0); prs.save(path)
    return path


# --- 1. Cut-off replies are failures, never rows ---

def test_truncated_replies_make_no_rows(tmp_path):
    with ScriptedServer(truncate=1.0) as srv:
        ds = generate_dataset(load_documents(GUIDE), make_llm(srv, tmp_path), max_chunks=3)
    assert len(ds) == 3 and ds.counts()['kept'] == 0 and ds.counts()['questions'] == 0
    kinds = [f['kind'] for fs in ds.df.failures for f in fs]
    assert kinds == ['truncated'] * 3
    assert all('finish_reason=length' in f['message'] and f['raw'] for fs in ds.df.failures for f in fs)  # raw text kept

def test_truncated_reply_retried_once_with_larger_max_tokens(tmp_path):
    with ScriptedServer() as srv:  # the server honours max_tokens: 'Hello! How can I help you today?' is 8 tokens
        llm = make_llm(srv, tmp_path)
        r = llm.call(msg('hello'), max_tokens=5)
        assert r.ok and r.text == 'Hello! How can I help you today?' and r.attempts == 2
        assert [q['body']['max_tokens'] for q in srv.requests] == [5, 10]
        assert llm.call(msg('hello'), max_tokens=5).cached   # the whole reply is cached under the call the caller made
        no = make_llm(srv, tmp_path, retries=Retries(backoff=0.01, retry_truncated=0), cache=False).call(msg('hello'), max_tokens=5)
    assert (no.ok, no.failure.kind, no.attempts, no.value) == (False, 'truncated', 1, None)

def test_cached_truncated_reply_is_not_a_value(tmp_path):
    with ScriptedServer() as srv:
        llm = make_llm(srv, tmp_path)
        key = cache_key(llm.cache_endpoint, llm.model, msg('hi'), {'temperature': 0.0}, None)
        llm.cache.put(key, {'text': 'Evidence: runnable examples and r', 'model': 'm', 'finish_reason': 'length',
                            'usage': {'prompt_tokens': 5, 'completion_tokens': 9}})
        r = llm.call(msg('hi'))
    assert r.cached and r.failure.kind == 'truncated' and srv.requests == []

@needs_docs
def test_page_reply_ending_in_an_unclosed_table_is_a_failed_page(tmp_path, monkeypatch, capsys):
    pdf = DOCS/'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/eu-004.pdf'
    cut = lambda messages, rng: '## Trade\n\nValues in millions.\n\n<table><tr><th></th><th>2019</th></tr><tr><td>Germany</td><td>41'
    with ScriptedServer(rules={'pdf_page': cut}) as srv:
        res = parse_pdf(pdf, tmp_path/'a', llm=make_llm(srv, tmp_path), pages=[2])
    assert res.pages[0].failure.kind == 'parse' and 'unclosed table' in res.pages[0].failure.message
    with ScriptedServer(truncate=1.0) as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['parse', str(pdf), '--out', str(tmp_path/'b'), '--pages', '2,3']) == 1
    out, err = capsys.readouterr()
    assert '0/2 pages parsed' in out and 'page 2 failed: truncated' in err


# --- 2. A total deadline per attempt ---

class TrickleServer:
    "A raw HTTP server that sends a valid chat reply, status line and all, one byte every `delay` seconds."
    def __init__(self, delay=1.0):
        self.delay, self.sock = delay, socket.socket()
        self.sock.bind(('127.0.0.1', 0)); self.sock.listen(16)
        self.base_url = f'http://127.0.0.1:{self.sock.getsockname()[1]}/v1'
        threading.Thread(target=self._serve, daemon=True).start()
    def _serve(self):
        while True:
            try: conn, _ = self.sock.accept()
            except OSError: return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()
    def _answer(self, conn):
        body = json.dumps({'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'slow', 'choices': [
            {'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': 'Hello there, eventually.'}}]}).encode()
        reply = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' % len(body) + body
        try:
            conn.recv(65536)
            for i in range(len(reply)): conn.sendall(reply[i:i+1]); time.sleep(self.delay)
        except OSError: pass
        finally: conn.close()
    def close(self): self.sock.close()

def test_a_trickling_server_cannot_hold_a_call(tmp_path):
    srv = TrickleServer(delay=1.0)   # the whole reply would take about 4 minutes
    try:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='m', cache=False, deadlines=Deadlines(total=2), retries=Retries(max_retries=1, backoff=0.01), progress=False)
        t0 = time.perf_counter()
        r = llm.call(msg('hello'))
        took = time.perf_counter() - t0
    finally: srv.close()
    assert r.failure.kind == 'timeout' and r.attempts == 2 and took < 7, (r.failure, took)
    assert 'no complete reply within 2 s' in r.failure.message and srv.base_url in r.failure.message

def test_timeout_and_retries_from_the_environment(monkeypatch):
    monkeypatch.setenv('RAGNB_TIMEOUT', '1.5'); monkeypatch.setenv('RAGNB_MAX_RETRIES', '0')
    llm = LLM(cache=False)
    assert (llm.timeout, llm.max_retries) == (1.5, 0)
    assert (LLM(cache=False, deadlines=Deadlines(total=9), retries=Retries(max_retries=2)).timeout, LLM(cache=False, retries=Retries(max_retries=2)).max_retries) == (9, 2)
    monkeypatch.setenv('RAGNB_TIMEOUT', 'soon')
    with pytest.raises(ValueError, match="RAGNB_TIMEOUT='soon'"): LLM(cache=False)

@pytest.mark.skipif(not RAGCHECKER.exists(), reason='shared data not present')
def test_check_with_timeout_on_a_trickling_server_ends(tmp_path, monkeypatch, capsys):
    with ScriptedServer(trickle=1.0) as srv:   # each reply body, one byte a second
        use_endpoint(monkeypatch, srv.base_url)
        t0 = time.perf_counter()
        code = main(['check', str(RAGCHECKER/'checking_inputs.json'), '--out', str(tmp_path/'o.json'), '--timeout', '1',
                     '--max-retries', '0'])
        took = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 1 and took < 15, took
    assert 'no complete reply within 1 s' in err


# --- 3. Damaged PDFs say so ---

@needs_docs
def test_damaged_pdf_warns_on_the_console_and_in_the_manifest(tmp_path, capsys):
    whole = (DOCS/'docling/tests/data/pdf/sources/normal_4pages.pdf').read_bytes()
    (tmp_path/'half.pdf').write_bytes(whole[:len(whole) // 2])
    assert main(['parse', str(tmp_path/'half.pdf'), '--out', str(tmp_path/'out'), '--offline']) == 0
    out, err = capsys.readouterr()
    assert '4/4 pages parsed' in out
    assert 'warning: half.pdf is damaged' in err and re.search(r'page 1: warning: \d+ of \d+ characters .* garbage', err)
    assert 'page 2: warning' not in err
    m = json.loads((tmp_path/'out'/'manifest.json').read_text())
    assert 'damaged' in m['warnings'][0] and 'garbage' in m['pages'][0]['warnings'][0] and m['pages'][1]['warnings'] == []

def test_scanned_page_warning_is_printed(tmp_path, capsys):
    doc = pymupdf.open(); page = doc.new_page()
    page.insert_image(pymupdf.Rect(50, 50, 450, 350), stream=png_bytes(400, 300))
    doc.save(tmp_path/'scan.pdf')
    assert main(['parse', str(tmp_path/'scan.pdf'), '--out', str(tmp_path/'out'), '--offline']) == 0
    assert 'page 1: warning: no text layer' in capsys.readouterr().err


# --- 4. DOCX/PPTX decompression bombs ---

def test_docx_picture_bomb_is_never_inflated(tmp_path, capsys):
    bomb = repack(docx_with_picture(tmp_path/'ok.docx'), tmp_path/'bomb.docx', bytes(100_000_000))  # 100 MB of zeros
    assert bomb.stat().st_size < 500_000
    tracemalloc.start()
    try:
        res = parse_office(bomb, tmp_path/'out')
        peak = tracemalloc.get_traced_memory()[1]
    finally: tracemalloc.stop()
    assert peak < 30_000_000, peak
    page = res.pages[0]
    assert page.images == {} and 'revenue grew' in page.markdown
    assert 'word/media/image1.png not read: 100,000,000 bytes uncompressed' in page.warnings[0]
    assert f'over the {MAX_IMAGE_BYTES:,}-byte cap' in page.warnings[0]
    assert not any(p.suffix == '.png' for p in (tmp_path/'out').iterdir())
    assert json.loads((tmp_path/'out'/'manifest.json').read_text())['pages'][0]['warnings'] == page.warnings
    assert main(['parse', str(bomb), '--out', str(tmp_path/'cli'), '--max-image-mb', '200']) == 0  # a larger cap reads it...
    assert 'not an image' in capsys.readouterr().err   # ... and finds zeros, not a picture

def test_office_pictures_are_checked_by_their_bytes(tmp_path):
    fake = repack(docx_with_picture(tmp_path/'ok.docx'), tmp_path/'fake.docx', b'MZ\x90\x00 not a picture at all')
    segs = docx_segments(fake, tmp_path/'out')
    bad = [s for s in segs if s.failure]
    assert len(bad) == 1 and bad[0].kind == 'image' and 'are not an image' in bad[0].failure and bad[0].content == ''
    good = [s for s in docx_segments(tmp_path/'ok.docx', tmp_path/'out2') if s.kind == 'image']
    assert len(good) == 1 and Path(good[0].content).read_bytes().startswith(b'\x89PNG')
    slides = repack(pptx_with_picture(tmp_path/'ok.pptx'), tmp_path/'bomb.pptx', bytes(2_000_000))
    pic = [s for s in pptx_segments(slides, tmp_path/'out3', max_image_bytes=1_000_000) if s.kind == 'image']
    assert len(pic) == 1 and 'over the 1,000,000-byte cap' in pic[0].failure

def test_office_xml_part_over_its_cap_names_the_file(tmp_path, capsys):
    big = docx_with_picture(tmp_path/'big.docx')
    with pytest.raises(DocumentError, match=r"big.docx: part \S+ is [\d,]+ bytes uncompressed .* over the 1,000-byte cap \(max_part_bytes\)"):
        docx_segments(big, max_part_bytes=1000)
    assert main(['parse', str(big), '--out', str(tmp_path/'o'), '--max-part-mb', '0.001']) == 2
    assert 'max_part_bytes' in capsys.readouterr().err


# --- 5. Memory stays proportional to the largest document ---

def test_grounding_memory_does_not_grow_with_the_number_of_documents():
    from ragnb.docs.evidence import ground
    docs = [Document(f"Intro {i}.\n\n" + ''.join(f"Fact {i}-{k} is written down here.\n\n" for k in range(150_000)),
                     'mem', f'd{i}.md', f'd{i}.md', '.md') for i in range(3)]
    def peak(ds):
        tracemalloc.start()
        try:
            for d in ds:
                first = Chunk(d.text[:8], d.id, 0, 0)   # 'Intro 0.': the evidence is elsewhere
                assert ground(f"FACT {d.id[1]}-149000 IS WRITTEN DOWN HERE.", first, d).method == 'normalised'
            return tracemalloc.get_traced_memory()[1]
        finally: tracemalloc.stop()
    one, three = peak(docs[:1]), peak(docs)
    assert three < 1.5 * one, (one, three)


# --- 6. Duplicate query_ids ---

def dup_input(tmp_path) -> Path:
    r = dict(query_id='q-7', query='Where does the Nile flow?', gt_answer='Into the Mediterranean.',
             response='It flows into the Mediterranean Sea.', retrieved_context=[{'doc_id': 'a', 'text': 'The Nile flows north.'}])
    f = tmp_path/'dup.json'
    f.write_text(json.dumps({'results': [r, dict(r, query_id='q-8'), dict(r), dict(r, query_id='q-8')]}))
    return f

def test_check_rejects_duplicate_query_ids_before_any_call(tmp_path, monkeypatch, capsys):
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['check', str(dup_input(tmp_path)), '--out', str(tmp_path/'o.json')]) == 1
        assert srv.requests == [] and not (tmp_path/'o.json').exists()
    assert "2 query_id(s) occur more than once: 'q-7', 'q-8'" in capsys.readouterr().err

def test_metrics_rejects_duplicate_query_ids(tmp_path, capsys):
    labelled = [dict(r, answer2response=['Entailment'], response2answer=['Entailment'], retrieved2response=[['Neutral']],
                     retrieved2answer=[['Neutral']]) for r in json.loads(dup_input(tmp_path).read_text())['results']]
    (tmp_path/'m.json').write_text(json.dumps({'results': labelled}))
    assert main(['metrics', str(tmp_path/'m.json')]) == 2
    assert "occur more than once: 'q-7', 'q-8'" in capsys.readouterr().err
    with pytest.raises(ValueError, match='occur more than once'): score(labelled)


# --- 7. Reprs escape what came from files and models ---

HOSTILE = "x` <img src=x onerror=alert(1)> `\n```\n<img src=y onerror=alert(2)>\n```\n$x$ [a](javascript:alert(3)) <script>alert(4)</script>"

class _Tags(HTMLParser):
    def __init__(self): super().__init__(); self.tags = []
    def handle_starttag(self, tag, attrs): self.tags.append((tag, dict(attrs)))
    handle_startendtag = handle_starttag

def assert_inert_html(html:str):
    p = _Tags(); p.feed(html)
    live = [(t, a) for t, a in p.tags if t in ('img', 'script', 'iframe', 'svg', 'object', 'style')
            or any(k.startswith('on') for k in a) or 'javascript:' in str(a.get('href', ''))]
    assert not live, (live, html)

def assert_inert_markdown(md:str):
    assert_inert_html(mistune.create_markdown(escape=False)(md))   # as Jupyter renders it: raw HTML passes through
    prose = re.sub(r'(?ms)^(`{3,})[^\n]*\n.*?^\1[ \t]*$', '', md)   # fenced blocks, then code spans, hold no math
    prose = re.sub(r'(`+)(?!`).*?(?<!`)\1(?!`)', '', prose, flags=re.S)
    assert not re.search(r'(?<!\\)\$', prose), md

def test_every_repr_escapes_hostile_text():
    failed = Failure(HOSTILE, 'parse', HOSTILE, 1)
    qa = QA(HOSTILE, 'd', 'd.md', 'd#0', 0, HOSTILE, question=HOSTILE, answer=HOSTILE, evidence=HOSTILE, drop_reason=HOSTILE,
            groundedness_score=3)
    docs = Documents([Document('text', 'src', HOSTILE + '.md', 'x.md', '.md')], [LoadIssue(HOSTILE + '.md', HOSTILE)])
    page = ParsedPage(1, HOSTILE, warnings=[HOSTILE])
    markdown = [Result(HOSTILE, text=HOSTILE, model=HOSTILE, prompt=HOSTILE), Result(HOSTILE, failure=failed, model='m'),
                qa, QA(HOSTILE, 'd', 'd.md', 'd#0', 0, 'ctx', failures=[dict(stage='generate', kind='parse', message=HOSTILE)]),
                Critique(2, HOSTILE), docs, LoadIssue(HOSTILE, HOSTILE), Chunk(HOSTILE, HOSTILE, 0, 0),
                RAGResult(HOSTILE, HOSTILE, 'g', 'r', []), Relevance(HOSTILE, [HOSTILE], {HOSTILE: (0, 1)}, 1),
                Relevance(HOSTILE, [], {}, 0, reason=HOSTILE), page, ParsedPage(2, failure=failed),
                ParsedDoc(HOSTILE + '.pdf', 'd', 'offline', [page], model=HOSTILE, warnings=[HOSTILE])]
    for o in markdown: assert_inert_markdown(o._repr_markdown_())
    s = score([]); s.name, s.errors = HOSTILE, [ResultError(HOSTILE, HOSTILE, HOSTILE)]
    summary = pd.DataFrame([dict(k=1, metric=m, mean=.5, low=.4, high=.6, n=1) for m in RETRIEVAL_METRICS])
    html = [Segment('image', '', HOSTILE, 1, failure=HOSTILE), Segment('text', HOSTILE), Segment('table', HOSTILE),
            Dataset.from_records([qa]), s, RetrievalReport(HOSTILE, [1], pd.DataFrame(), summary)]
    for o in html: assert_inert_html(o._repr_html_())

def test_the_checks_catch_a_live_tag():   # the helpers above can fail
    with pytest.raises(AssertionError): assert_inert_markdown('**x** <img src=x onerror=alert(1)>')
    with pytest.raises(AssertionError): assert_inert_markdown('```text\n' + HOSTILE + '\n```')
    with pytest.raises(AssertionError): assert_inert_markdown('costs $x$')


# --- 8. Only regular files are read ---

def test_a_fifo_named_md_is_skipped_not_read(tmp_path):
    os.mkfifo(tmp_path/'pipe.md'); (tmp_path/'good.md').write_text('# Good\n\nThis file is fine.\n')
    code = textwrap.dedent(f'''
        from ragnb.docs.documents import load_documents
        d = load_documents({str(tmp_path)!r})
        print([x.id for x in d], [(i.path, i.reason) for i in d.issues])
        d = load_documents({str(tmp_path/'pipe.md')!r})
        print(len(d), [i.reason for i in d.issues])''')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)  # before: blocked forever
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["['good.md'] [('pipe.md', 'not a regular file (a FIFO)')]", "0 ['not a regular file (a FIFO)']"]


# --- 9. Errors that say what went wrong, early ---

def test_all_calls_failed_says_what_and_exits_nonzero(tmp_path, monkeypatch, capsys):
    url = f'http://127.0.0.1:{closed_port()}/v1'
    use_endpoint(monkeypatch, url)
    assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2', '--max-retries', '0']) == 1
    err = capsys.readouterr().err
    assert f'ragnb generate: all 2 calls failed: APIConnectionError at {url}' in err and not (tmp_path/'qa.jsonl').exists()
    assert main(['demo', '--out', str(tmp_path/'demo'), '--max-chunks', '2', '--max-retries', '0']) == 1
    err = capsys.readouterr().err
    assert f'ragnb demo: error: all 2 calls failed: APIConnectionError at {url}' in err and 'survived' not in err

def test_rows_name_the_model_that_answered(tmp_path, monkeypatch, capsys):
    with ScriptedServer() as srv:   # asked for gpt-4o-mini (the default), answered by scripted-test-model
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2', '--keep-all']) == 0
        assert {q['model'] for q in srv.requests} == {'gpt-4o-mini'}
    df = Dataset.load(tmp_path/'qa.jsonl').df
    assert set(df.generator_model) == {'scripted-test-model'} and set(df.critic_model.dropna()) == {'scripted-test-model'}
    llm = LLM(cache=False)
    with ScriptedServer() as srv:
        llm.base_url = srv.base_url
        r = llm.call(msg('hello'))
    assert (llm.model, r.model, r.usage.cost, llm.usage.cost) == ('gpt-4o-mini', 'scripted-test-model', 0.0, 0.0)

def test_outputs_are_checked_before_any_call(tmp_path, monkeypatch, capsys):
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['check', str(dup_input(tmp_path)), '--out', str(tmp_path/'nodir'/'x.json')]) == 1
        assert main(['generate', str(GUIDE), '--out', str(tmp_path)]) == 1
        assert srv.requests == []
    err = capsys.readouterr().err
    assert 'the folder' in err and 'nodir does not exist' in err and 'is a folder; give a file name' in err

@pytest.mark.skipif(not RAGCHECKER.exists(), reason='shared data not present')
def test_a_corrupt_output_suggests_restart(tmp_path, monkeypatch, capsys):
    (tmp_path/'o.json').write_text('{"results": [{"query_id": "0", "query": ')
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['check', str(RAGCHECKER/'checking_inputs.json'), '--out', str(tmp_path/'o.json')]) == 1
        assert srv.requests == []
    assert 'pass --restart to start again from' in capsys.readouterr().err

def test_page_list_is_validated_by_argparse(capsys):
    with pytest.raises(SystemExit) as e: main(['parse', 'x.pdf', '--out', 'o', '--pages', '1,abc'])
    assert e.value.code == 2 and "argument --pages: 'abc' is not a page number" in capsys.readouterr().err

@pytest.mark.skipif(not RAGCHECKER.exists(), reason='shared data not present')
def test_metrics_say_over_how_many_results(tmp_path, monkeypatch, capsys):
    outputs = json.loads((RAGCHECKER/'checking_outputs.json').read_text())
    half = dict(outputs, results=[dict(outputs['results'][0], retrieved2answer=None), outputs['results'][1]])
    (tmp_path/'half.json').write_text(json.dumps(half))
    assert main(['metrics', str(tmp_path/'half.json')]) == 1
    err = capsys.readouterr().err
    assert 'each figure is a mean over 1 of 2 result(s); 1 left out: 1 x retrieved2answer: missing (None)' in err
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url); monkeypatch.setenv('RAGNB_MODEL', 'scripted-test-model')
        assert main(['check', str(RAGCHECKER/'checking_inputs.json'), '--out', str(tmp_path/'o.json')]) == 0
    assert 'metrics: each figure is a mean over 2 of 2 result(s)' in capsys.readouterr().err
    cov = json.loads((tmp_path/'o.json').read_text())['metrics_coverage']
    assert (cov['results'], cov['scored'], cov['left_out']) == (2, 2, 0)

def test_no_progress_bars_in_logs(tmp_path):
    with ScriptedServer() as srv:
        env = {**os.environ, 'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}
        r = subprocess.run([sys.executable, '-c', 'import sys; from ragnb.app.cli import main; sys.exit(main())', 'generate',
                            str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '3'],   # as the `ragnb` script does
                           capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert 'it/s' not in r.stderr and '\r' not in r.stderr and '%|' not in r.stderr, r.stderr

def test_retrieval_finds_the_documents_generate_used(tmp_path, monkeypatch, capsys):
    src = tmp_path/'docs'; src.mkdir(); (src/'guide.md').write_text(GUIDE.read_text())
    monkeypatch.chdir(tmp_path)
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['generate', 'docs', '--out', str(tmp_path/'out'/'qa.jsonl'), '--max-chunks', '3']) == 0
    assert set(Dataset.load(tmp_path/'out'/'qa.jsonl').df.doc_source) == {str(src.resolve())}
    (tmp_path/'elsewhere').mkdir(); monkeypatch.chdir(tmp_path/'elsewhere')
    capsys.readouterr()   # the dataset's doc_source is not followed (issue 27): the error says which --docs to pass
    assert main(['retrieval', str(tmp_path/'out'/'qa.jsonl'), '--k', '1,3']) == 1
    assert f'pass --docs {src.resolve()}' in capsys.readouterr().err
    assert main(['retrieval', str(tmp_path/'out'/'qa.jsonl'), '--docs', str(src.resolve()), '--k', '1,3']) == 0
    assert '1 documents' in capsys.readouterr().out


# --- 10. Junk input ---

def test_inline_base64_images_never_reach_the_model(tmp_path):
    payload = base64.b64encode(os.urandom(300_000)).decode()
    (tmp_path/'inline.md').write_text(GUIDE.read_text()[:2500] + f"\n\n![diagram](data:image/png;base64,{payload})\n\nThe end of the guide.\n")
    docs = load_documents(tmp_path/'inline.md')
    chunks = split_documents(docs)
    assert len(chunks) <= 3, len(chunks)   # before: the payload was split into ~140 passages
    for c in chunks: assert docs[0].text[c.start_index:c.end_index] == c.text and payload[:200] not in c.text
    with ScriptedServer() as srv:
        generate_dataset(docs, make_llm(srv, tmp_path))
        assert len(srv.calls('factoid_qa')) == len(chunks)
        assert not any(payload[:200] in json.dumps(q['body']) for q in srv.requests)

def test_front_matter_only_files_are_skipped(tmp_path):
    (tmp_path/'tags.md').write_text('---\ntitle: Tags\nlayout: index\n---\n\n\n')
    (tmp_path/'post.md').write_text('---\ntitle: Post\n---\nThe post has a body.\n')
    d = load_folder(tmp_path)
    assert [x.id for x in d] == ['post.md'] and [(i.path, i.reason) for i in d.issues] == [('tags.md', 'nothing but front matter')]

def test_latin1_files_load_with_encoding(tmp_path, monkeypatch, capsys):
    (tmp_path/'docs').mkdir()
    (tmp_path/'docs'/'cafe.md').write_bytes(('# Café\n\n' + GUIDE.read_text()[:2000]).encode('latin-1', 'replace'))
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['generate', str(tmp_path/'docs'), '--out', str(tmp_path/'a.jsonl')]) == 1
        assert 'skipped cafe.md: not valid utf-8: byte 5' in capsys.readouterr().err and srv.requests == []
        assert main(['generate', str(tmp_path/'docs'), '--out', str(tmp_path/'b.jsonl'), '--encoding', 'latin-1']) == 0
    assert 'documents: 1' in capsys.readouterr().out


def test_regions_pages_are_checked_by_argparse(capsys):
    "`ragnb regions --pages 1,abc` is a usage error naming the bad page, not a ValueError from int()."
    from ragnb.app.cli import main
    pdf = sample_path('documents', 'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/eu-004.pdf')
    with pytest.raises(SystemExit) as e: main(['regions', str(pdf), '--pages', '1,abc'])
    assert e.value.code == 2 and "'abc'" in capsys.readouterr().err


# --- Issue 27: untrusted datasets, result files and manifests ---

MARKER = 'ragnb-hostile-marker-7f3a9c'

def secret_beside(tmp_path) -> Path:
    "A file outside the dataset's folder holding a marker that must never be read."
    p = tmp_path/'private'/'notes.txt'; p.parent.mkdir(exist_ok=True)
    p.write_text(f'# Private notes\n\n{MARKER} lives here and nowhere else.\n'); return p

def write_jsonl(path:Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows)); return path

def leaked(srv) -> bool: return any(MARKER in json.dumps(r.get('body')) for r in srv.requests)

@pytest.mark.parametrize('how', ['dotdot', 'absolute', 'link'])
def test_dataset_source_doc_cannot_read_outside_its_folder(tmp_path, monkeypatch, capsys, how):
    secret = secret_beside(tmp_path)
    ds = tmp_path/'ds'; ds.mkdir()
    if how == 'link': (ds/'guide.md').symlink_to(secret)
    src = {'dotdot': '../private/notes.txt', 'absolute': str(secret), 'link': 'guide.md'}[how]
    qa = write_jsonl(ds/'qa.jsonl', [dict(question='What lives here?', source_doc=src, evidence=MARKER)])
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url); monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
        assert main(['retrieval', str(qa), '--retriever', 'dense', '--embed-model', 'scripted-embedding']) == 1
        assert main(['retrieval', str(qa)]) == 1   # BM25: nothing indexed either
    out, err = capsys.readouterr()
    assert not leaked(srv) and not srv.requests
    assert MARKER not in out and err.count('field source_doc') == 2 and 'row 0' in err and 'Traceback' not in err

def git_repo_with_marker(tmp_path) -> Path:
    repo = tmp_path/'upstream'; repo.mkdir()
    (repo/'doc.md').write_text(f'# Doc\n\n{MARKER} is in the repository.\n')
    env = {**os.environ, 'GIT_AUTHOR_NAME': 't', 'GIT_AUTHOR_EMAIL': 't@x', 'GIT_COMMITTER_NAME': 't',
           'GIT_COMMITTER_EMAIL': 't@x'}
    for cmd in (['init', '-q'], ['add', '.'], ['commit', '-qm', 'doc']):
        subprocess.run(['git', *cmd], cwd=repo, check=True, env=env, capture_output=True)
    return repo

def test_dataset_doc_source_is_never_followed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    url = git_repo_with_marker(tmp_path).as_uri()            # a URL the dataset names: cloned by the old code
    folder = secret_beside(tmp_path).parent                     # a folder the dataset names: read by the old code
    for made, src in [(url, 'doc.md'), (str(folder), 'notes.txt')]:
        qa = write_jsonl(tmp_path/'ds'/'qa.jsonl', [dict(question='Where is it?', source_doc=src, evidence=MARKER,
                                                          doc_source=made)])
        assert main(['retrieval', str(qa), '--k', '1']) == 1
        out, err = capsys.readouterr()
        assert MARKER not in out and f'pass --docs {made}' in err and 'row 0, field source_doc' in err
    assert not (tmp_path/'cache'/'repos').exists()              # nothing was cloned
    assert main(['retrieval', str(qa), '--docs', url, '--k', '1']) == 0   # the user names the URL: cloned
    assert 'hit rate' in capsys.readouterr().out and (tmp_path/'cache'/'repos').exists()

def test_retrieval_reads_documents_bounded(tmp_path, capsys):
    from ragnb.docs.documents import read_text
    big = tmp_path/'big.md'; big.write_text('x' * 5000)
    with pytest.raises(Exception, match='over the 1,000-byte limit'): read_text(big, limit=1000)
    fifo = tmp_path/'ds'/'pipe.md'; fifo.parent.mkdir(); os.mkfifo(fifo)
    qa = write_jsonl(tmp_path/'ds'/'qa.jsonl', [dict(question='q?', source_doc='pipe.md', evidence='x')])
    assert main(['retrieval', str(qa)]) == 1                    # a FIFO never blocks the command
    assert 'not a regular file' in capsys.readouterr().err

def test_clone_never_reads_a_url_as_an_option(tmp_path):
    from ragnb.docs.documents import LoadError, clone
    flag = tmp_path/'ran'
    with pytest.raises(LoadError, match=f"repository '--upload-pack=touch {flag}' does not exist"):  # a repository
        clone(f'--upload-pack=touch {flag}', dest=tmp_path/'dest')
    assert not flag.exists()

class BadEmbeddings:
    "A loopback OpenAI-compatible embeddings endpoint whose vectors are `vector(i, text)` (NaN, short, ragged...)."
    def __init__(self, vector): self.vector, self.requests = vector, []
    def __enter__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        me = self
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                me.requests.append(body)
                data = [{'object': 'embedding', 'index': i, 'embedding': me.vector(i, t)} for i, t in enumerate(body['input'])]
                out = json.dumps({'object': 'list', 'data': data, 'model': body['model'],
                                  'usage': {'prompt_tokens': 1, 'total_tokens': 1}}).encode()  # NaN as JSON's NaN
                self.send_response(200); self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(out))); self.end_headers(); self.wfile.write(out)
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f'http://127.0.0.1:{self.httpd.server_port}/v1'
        return self
    def __exit__(self, *a): self.httpd.shutdown(); self.httpd.server_close()

def guide_dataset(tmp_path) -> Path:
    (tmp_path/'ds').mkdir(exist_ok=True); (tmp_path/'ds'/'guide.md').write_text(GUIDE.read_text())
    text = GUIDE.read_text(); ev = text[200:260]
    return write_jsonl(tmp_path/'ds'/'qa.jsonl', [dict(question=f'Question {n}?', source_doc='guide.md', evidence=ev,
                       evidence_start=200, evidence_end=260, id=f'q{n}') for n in range(4)])

@pytest.mark.parametrize('bad,expect', [
    (lambda i, t: [float('nan')] * 8 if 'Question' not in t and i == 1 else [1.0] + [0.0] * 7, 'NaN or infinite values'),
    (lambda i, t: [1.0, 0.0] if i == 1 else [1.0] + [0.0] * 7, '2 numbers where the first vector has 8'),
    (lambda i, t: [[1.0], [0.0]] if i == 1 else [1.0] + [0.0] * 7, 'not a flat list of numbers'),
])
def test_bad_embedding_vectors_are_refused_naming_the_text(tmp_path, monkeypatch, capsys, bad, expect):
    qa = guide_dataset(tmp_path)
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    with BadEmbeddings(bad) as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['retrieval', str(qa), '--retriever', 'dense', '--embed-model', 'e', '--k', '1,3']) == 1
        out, err = capsys.readouterr()
        assert expect in err and "chunk 'guide.md#1'" in err and 'text 1' in err and 'Traceback' not in err
        assert 'hit rate' not in out
        n = len(srv.requests)   # a bad vector is never cached: asking again asks the endpoint again
        assert main(['retrieval', str(qa), '--retriever', 'dense', '--embed-model', 'e', '--k', '1,3']) == 1
        assert len(srv.requests) > n

def test_bad_query_vector_names_its_question(tmp_path, monkeypatch, capsys):
    qa = guide_dataset(tmp_path)
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    with BadEmbeddings(lambda i, t: [float('inf')] * 8 if t == 'Question 2?' else [1.0] + [0.0] * 7) as srv:
        use_endpoint(monkeypatch, srv.base_url)
        assert main(['retrieval', str(qa), '--retriever', 'dense', '--embed-model', 'e']) == 1
    err = capsys.readouterr().err
    assert "question 'q2'" in err and 'NaN or infinite values' in err

ESCAPES = '\x1b]0;pwned-title\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m'

def assert_no_escapes(text:str):
    assert not re.search('[\x00-\x08\x0b-\x1f\x7f-\x9f]', text.replace('\r', '')), repr(text[:300])

def test_show_prints_model_and_file_text_without_escapes(tmp_path, monkeypatch, capsys):
    from ragnb.testing.rules import scripted_factoid
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    evil = {'factoid_qa': lambda call, rng: scripted_factoid(call, rng) + ESCAPES}
    with ScriptedServer(rules=evil) as srv:
        use_endpoint(monkeypatch, srv.base_url)
        # the escapes end the reply, so they land in its evidence, which is then not in the passage: keep the row
        assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '1',
                     '--keep-unfound-evidence']) == 0
    ds = Dataset.load(tmp_path/'qa.jsonl')
    rows = [json.loads(l) for l in (tmp_path/'qa.jsonl').read_text().splitlines()]
    rows[0]['question'] = 'What? ' + ESCAPES; rows[0]['context'] = rows[0]['context'] + ESCAPES   # a hostile file
    (tmp_path/'evil.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    capsys.readouterr()
    for f in ('qa.jsonl', 'evil.jsonl'):
        main(['show', str(tmp_path/f), ds.df.id[0], '--cache', str(tmp_path/'cache'/'calls.sqlite'), '--full'])
        out, err = capsys.readouterr()
        assert_no_escapes(out + err)
        assert '\\x1b]0;pwned-title\\x07' in out and '\\x1b[2J' in out and '\\x1b]52;' in out  # shown, not obeyed

def test_every_command_prints_file_text_without_escapes(tmp_path, capsys):
    ds = tmp_path/'ds'; ds.mkdir(); (ds/'guide.md').write_text(GUIDE.read_text())
    qa = write_jsonl(ds/'qa.jsonl', [dict(question='Q?' + ESCAPES, source_doc='guide.md', evidence='not in it' + ESCAPES,
                                          id='q' + ESCAPES)])
    assert main(['retrieval', str(qa), '--k', '1']) == 0                           # the skipped question's id
    bad = write_jsonl(ds/'bad.jsonl', [dict(question='Q?', source_doc='gone' + ESCAPES)])
    assert main(['retrieval', str(bad)]) == 1                                       # an error naming the value
    res = tmp_path/'r.json'
    res.write_text(json.dumps({'results': [dict(query_id='q' + ESCAPES, query='Q' + ESCAPES, gt_answer='A', response='B',
                                                retrieved_context=[])]}))
    main(['metrics', str(res)])                                                     # not scored: named by its id
    out, err = capsys.readouterr()
    assert_no_escapes(out + err)
    assert out.count('\\x1b]0;pwned-title') >= 1 and err.count('\\x1b]0;pwned-title') >= 2

def test_progress_bars_keep_their_carriage_return():
    from ragnb.app.cli import TerminalSafe
    buf = io.StringIO(); TerminalSafe(buf, keep_cr=True).write('\r 50%|#####     |\x1b[A')
    assert buf.getvalue() == '\r 50%|#####     |\\x1b[A'

def parse_folder(tmp_path, page:dict) -> Path:
    d = tmp_path/'parse'; d.mkdir(exist_ok=True)
    (d/'manifest.json').write_text(json.dumps({'file': 'report.pdf', 'mode': 'vision', 'pages': [{'page': 1, **page}]}))
    return d

@pytest.mark.parametrize('field', ['markdown', 'tables', 'link', 'page_image', 'images'])
def test_show_keeps_manifest_paths_inside_the_parse_folder(tmp_path, capsys, field):
    secret = secret_beside(tmp_path)
    page = {'markdown': '../private/notes.txt', 'tables': {'tables': [str(secret)]}, 'page_image': str(secret),
            'images': {'images': ['../private/notes.txt']}}
    if field == 'link':
        (tmp_path/'parse').mkdir(); (tmp_path/'parse'/'page_1.md').symlink_to(secret); page = {'markdown': 'page_1.md'}
    else: page = {field: page[field]} if not isinstance(page[field], dict) else page[field]
    d = parse_folder(tmp_path, page)
    assert main(['show', str(d), '1', '--cache', str(tmp_path/'none.sqlite')]) == 1
    out, err = capsys.readouterr()
    assert MARKER not in out + err and 'pages[0], field ' in err and 'Traceback' not in err

def test_show_refuses_a_device_as_a_page(tmp_path, capsys):
    d = parse_folder(tmp_path, {'markdown': '/dev/zero'})
    (d/'page.md').symlink_to('/dev/zero')
    assert main(['show', str(d), '1']) == 1 and 'field markdown' in capsys.readouterr().err
    (d/'manifest.json').write_text(json.dumps({'file': 'r.pdf', 'pages': [{'page': 1, 'markdown': 'page.md'}]}))
    assert main(['show', str(d), '1']) == 1 and 'field markdown' in capsys.readouterr().err  # a link out of it
    os.mkfifo(d/'fifo.md')
    (d/'manifest.json').write_text(json.dumps({'file': 'r.pdf', 'pages': [{'page': 1, 'markdown': 'fifo.md'}]}))
    assert main(['show', str(d), '1']) == 1 and 'not a regular file' in capsys.readouterr().err

@pytest.mark.parametrize('manifest,expect', [
    ({'file': 'r.pdf', 'pages': [{'page': '1'}]}, "pages[0]: expected an object with an integer 'page'"),
    ({'file': 'r.pdf', 'pages': [{'page': 1, 'tables': 'x.html'}]}, 'pages[0], field tables: must be a list'),
    ({'file': 'r.pdf', 'pages': [{'page': 1, 'failure': 'oops'}]}, 'pages[0], field failure'),
    ('[' * 100_000 + ']' * 100_000, 'nested too deeply'),
])
def test_show_refuses_a_malformed_manifest(tmp_path, capsys, manifest, expect):
    d = tmp_path/'parse'; d.mkdir()
    (d/'manifest.json').write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    assert main(['show', str(d), '1']) == 1
    err = capsys.readouterr().err
    assert expect in err and 'Traceback' not in err

def checked_result(**kw) -> dict:
    return dict(query_id='q1', query='Q', gt_answer='A', response='B', retrieved_context=[{'text': 'c'}],
                response_claims=[['a', 'b', 'c']], gt_answer_claims=[['a', 'b', 'c']], answer2response=['Entailment'],
                response2answer=['Entailment'], retrieved2response=[['Entailment']],
                retrieved2answer=[['Entailment']], **kw)

@pytest.mark.parametrize('content,expect', [
    ({'results': [checked_result(ragnb=[1])]}, "result 0 (query_id 'q1'), field 'ragnb': expected an object, got list"),
    ({'results': [checked_result(ragnb={'warnings': 5})]}, "field 'ragnb.warnings': expected a list of warnings, got int"),
    ({'results': [checked_result(ragnb={'warnings': [5]})]}, "field 'ragnb.warnings': warning 0 is a int"),
    ({'results': [checked_result(), 7]}, 'result 1: expected an object, got int'),
    ('{"results": [' + '[' * 100_000 + ']' * 100_000 + ']}', 'JSON nested too deeply'),
])
def test_metrics_names_the_malformed_result_and_field(tmp_path, capsys, content, expect):
    f = tmp_path/'r.json'; f.write_text(content if isinstance(content, str) else json.dumps(content))
    assert main(['metrics', str(f)]) == 2
    err = capsys.readouterr().err
    assert expect in err and 'Traceback' not in err
    with pytest.raises(ValueError): load_results(f)   # the Python API refuses it too, with the field

def rag_input(**kw) -> dict:
    return dict(query_id='q1', query='What is checked?', gt_answer='The claims are checked.',
                response='The claims are checked against the chunks.',
                retrieved_context=[{'doc_id': 'd', 'text': 'The claims are checked against the chunks.'}], **kw)

@pytest.mark.parametrize('field,value,expect', [
    ('response', 'The claims \ud800 are checked.', "result 1 (query_id 'q2'), field 'response': a lone surrogate"),
    ('gt_answer', 'Fine, then \udfff.', "result 1 (query_id 'q2'), field 'gt_answer': a lone surrogate"),
    ('retrieved_context', [{'text': 'ok'}, {'text': 'bad \ud83d'}], "field 'retrieved_context[1].text'"),
    ('response', '', "result 1 (query_id 'q2'), field 'response' is empty"),
    ('gt_answer', '   ', "result 1 (query_id 'q2'), field 'gt_answer' is empty"),
])
def test_check_refuses_unsendable_or_empty_texts_before_any_call(tmp_path, monkeypatch, capsys, field, value, expect):
    f = tmp_path/'in.json'
    f.write_text(json.dumps({'results': [rag_input(), {**rag_input(), 'query_id': 'q2', field: value}]}))  # \ud800 as JSON
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url); monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
        assert main(['check', str(f), '--out', str(tmp_path/'out.json')]) == 1
    err = capsys.readouterr().err
    assert expect in err and 'Traceback' not in err
    assert srv.requests == [] and not (tmp_path/'out.json').exists()   # nothing paid for, nothing written

def test_compare_without_common_questions_names_both_files(tmp_path, capsys):
    a, b = tmp_path/'a.json', tmp_path/'b.json'
    a.write_text(json.dumps({'results': [checked_result()]}))
    b.write_text(json.dumps({'results': [{**checked_result(), 'query_id': 'other'}]}))
    assert main(['compare', str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert f'{a} and {b} share no query_id' in err and 'reshape' not in err

def test_retrieval_kept_must_be_a_boolean(tmp_path, capsys):
    ds = tmp_path/'ds'; ds.mkdir(); (ds/'guide.md').write_text(GUIDE.read_text())
    qa = write_jsonl(ds/'qa.jsonl', [dict(question='Q?', source_doc='guide.md', evidence='x', kept=True),
                                     dict(question='R?', source_doc='guide.md', evidence='x', kept='false')])
    assert main(['retrieval', str(qa)]) == 1
    assert "row 1: field 'kept' must be true or false, not 'false'" in capsys.readouterr().err

@pytest.mark.parametrize('row,expect', [
    (dict(question=42), "row 0: field 'question' must be a string"),
    (dict(source_doc=['guide.md']), "row 0: field 'source_doc' must be a string"),
    (dict(evidence_start='abc', evidence_end=10), "row 0: field 'evidence_start' must be a character offset"),
    (dict(evidence_start=-5, evidence_end=10), "row 0: field 'evidence_start' must be a character offset"),
    (dict(evidence={'text': 'x'}), "row 0: field 'evidence' must be a string"),
    (dict(evidence_found='yes'), "row 0: field 'evidence_found' must be true or false"),
    (dict(hops=[{'text': 'no doc id'}], question_type='multi_hop'), "row 0: field 'hops' must be a list of hops"),
    (dict(id=[1]), "row 0: field 'id' must be a string or an integer"),
])
def test_retrieval_names_the_row_and_field_of_a_wrong_type(tmp_path, capsys, row, expect):
    ds = tmp_path/'ds'; ds.mkdir(); (ds/'guide.md').write_text(GUIDE.read_text())
    qa = write_jsonl(ds/'qa.jsonl', [{**dict(question='Q?', source_doc='guide.md', evidence='Documentation'), **row}])
    assert main(['retrieval', str(qa), '--k', '1']) == 1
    err = capsys.readouterr().err
    assert expect in err and str(qa) in err and 'Traceback' not in err
# --- Issue 27: the model endpoint and the call cache ---

import resource, sqlite3, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ragnb.core.calls import Request
from ragnb.core.cache import CacheError, CallCache

KEY = 'sk-hostile27-' + 'Qx7' * 12   # this test's own marker, not a credential

class Gateway:
    "A hostile OpenAI-compatible endpoint on 127.0.0.1: `status` answers every call with that HTTP status and a body "
    "echoing the Authorization header; else a 200 whose message.content is `content`. Counts what it receives."
    def __init__(self, status=200, content='Hello there.', body=None):
        self.status, self.content, self.body, self.requests = status, content, body, []
        gw = self
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                self.rfile.read(int(self.headers.get('content-length') or 0))
                gw.requests.append(self.path)
                auth = self.headers.get('authorization', '')
                if gw.status != 200:
                    out = {'error': {'message': f"bad header {auth!r}: request refused", 'type': 'gateway'}}
                else:
                    out = gw.body or {'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'gw', 'choices': [
                        {'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': gw.content}}],
                        'usage': {'prompt_tokens': 5, 'completion_tokens': 3, 'total_tokens': 8}}
                data = json.dumps(out).encode()
                self.send_response(gw.status); self.send_header('content-type', 'application/json')
                self.send_header('content-length', str(len(data))); self.end_headers(); self.wfile.write(data)
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.base_url = f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
    def __enter__(self): return self
    def __exit__(self, *a): self.httpd.shutdown(); self.httpd.server_close()

def gw_llm(gw, tmp_path, **kw):
    return LLM(base_url=gw.base_url, api_key=KEY, model='m', progress=False,
               **{'cache_path': tmp_path/'cache'/'calls.sqlite', 'retries': Retries(max_retries=1, backoff=0.01), **kw})

def folder_bytes(d:Path) -> bytes:
    return b''.join(f.read_bytes() for f in sorted(Path(d).rglob('*')) if f.is_file())

def ragnb_cli(*args, env=None, limit=None):
    "Run the `ragnb` command in a new process (optionally with files capped at `limit` bytes, a full disk)."
    cap = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))) if limit else None
    return subprocess.run([sys.executable, '-c', 'import sys; from ragnb.app.cli import main; sys.exit(main())', *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300,
                          preexec_fn=cap)

def test_an_endpoint_echoing_the_key_gets_it_nowhere(tmp_path):
    for status in (400, 500, 401):
        with Gateway(status) as gw:
            r = gw_llm(gw, tmp_path/str(status)).call(msg(f'status {status}'), item_id=f'i{status}')
        shown = ' '.join([r.failure.message, str(r.failure), str(r.errors), r._repr_markdown_(), r.trace._repr_html_()])
        assert '[redacted]' in shown and KEY not in shown, shown   # the gateway did echo it; it was removed
        assert r.failure.kind == {400: 'bad_request', 500: 'server_error', 401: 'auth'}[status]
        assert KEY.encode() not in folder_bytes(tmp_path/str(status)/'cache')
    with Gateway(content=f'You sent Bearer {KEY}, thanks') as gw:   # a reply that echoes it is stored without it
        r = gw_llm(gw, tmp_path/'200').call(msg('hello'))
    assert r.ok and KEY not in r.text and KEY.encode() not in folder_bytes(tmp_path/'200'/'cache')
    for status in (500, 401):   # the command line: nothing on stdout, stderr or in the cache folder
        with Gateway(status) as gw:
            p = ragnb_cli('generate', str(GUIDE), '--out', str(tmp_path/f'qa{status}.jsonl'), '--max-chunks', '2',
                          '--max-retries', '1', env={'OPENAI_BASE_URL': gw.base_url, 'OPENAI_API_KEY': KEY,
                                                     'RAGNB_CACHE_DIR': str(tmp_path/f'cli{status}')})
        assert p.returncode == 1 and 'bad header' in p.stderr and '[redacted]' in p.stderr, p.stderr
        assert KEY not in p.stdout + p.stderr and KEY.encode() not in folder_bytes(tmp_path/f'cli{status}')

@pytest.mark.parametrize('content,why', [(42, 'int (42)'), ([{'type': 'image_url', 'image_url': {'url': 'x'}}], 'parts image_url'),
                                         ({'text': 'hi'}, 'dict')])
def test_non_text_content_is_a_bad_reply_never_cached(tmp_path, content, why):
    with Gateway(content=content) as gw:
        llm = gw_llm(gw, tmp_path)
        r = llm.call(msg('hello'))
        assert (r.failure.kind, r.attempts, len(gw.requests)) == ('bad_reply', 2, 2)   # retried as a server error
        assert why in r.failure.message and 'not text' in r.failure.message and len(llm.cache) == 0
        llm.call(msg('hello'))
        assert len(gw.requests) == 4   # not cached: asked again

def test_text_parts_are_text(tmp_path):
    with Gateway(content=[{'type': 'text', 'text': 'Hello'}, {'type': 'text', 'text': ' there.'}]) as gw:
        r = gw_llm(gw, tmp_path).call(msg('hello'))
    assert r.ok and r.text == 'Hello there.'

def test_generate_survives_a_non_text_reply(tmp_path, monkeypatch, capsys):
    with Gateway(content=7) as gw:
        use_endpoint(monkeypatch, gw.base_url)
        code = main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2', '--max-retries', '0'])
    err = capsys.readouterr().err
    assert code == 1 and 'all 2 calls failed' in err and 'message.content is a int (7), not text' in err, err

def test_an_old_cache_row_without_text_is_a_miss(tmp_path):
    with ScriptedServer() as srv:
        llm = make_llm(srv, tmp_path)
        for bad in (42, ['a', 'list'], None):
            llm.cache.put(llm.key_of(Request(msg('hello'))), {'text': bad, 'model': 'm', 'usage': {'prompt_tokens': 'x'}})
            n = len(srv.requests)
            r = llm.call(msg('hello'))
            assert r.ok and not r.cached and isinstance(r.text, str) and len(srv.requests) == n + 1   # asked again
        llm.cache.put(llm.key_of(Request(msg('again'))), {'text': 3})
        rp = LLM(base_url=srv.base_url, api_key='replay', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
                 replay=True, progress=False).call(msg('again'))
    assert rp.failure.kind == 'bad_reply' and 'holds a int' in rp.failure.message and 'c.sqlite' in rp.failure.message

def test_a_refused_key_stops_the_run(tmp_path):
    with Gateway(401) as gw:
        res = gw_llm(gw, tmp_path, pacing=Pacing(concurrency=1)).batch([msg(f'q{i}') for i in range(30)])
        assert len(gw.requests) == 1
    assert [r.failure.kind for r in res] == ['auth'] * 30
    assert [r.attempts for r in res].count(0) == 29
    later = res[-1].failure.message
    assert later.startswith('not sent: the endpoint refused the API key') and 'bad header' in later and KEY not in later
    with Gateway(401) as gw:   # calls already in flight come back refused; none is sent after
        res = gw_llm(gw, tmp_path, pacing=Pacing(concurrency=4)).batch([msg(f'q{i}') for i in range(30)])
        assert len(gw.requests) <= 4 and all(r.failure.kind == 'auth' for r in res)
    with Gateway(403) as gw:   # a 403 that does not name the key (a model not allowed) stops nothing
        gw_llm(gw, tmp_path, pacing=Pacing(concurrency=1)).batch([msg(f'q{i}') for i in range(3)])
        assert len(gw.requests) == 3

def test_a_foreign_file_named_calls_sqlite_is_refused(tmp_path, monkeypatch, capsys):
    text = tmp_path/'text'/'calls.sqlite'; text.parent.mkdir(); text.write_text('these are my notes, not a cache\n' * 50)
    other = tmp_path/'other'/'calls.sqlite'; other.parent.mkdir()
    with sqlite3.connect(other) as c: c.execute('CREATE TABLE users (name TEXT)'); c.execute("INSERT INTO users VALUES ('ann')")
    before = {p: p.read_bytes() for p in (text, other)}
    with pytest.raises(CacheError, match='not an SQLite file'): LLM(cache_path=text)
    with pytest.raises(CacheError, match='with table.s. users, not a ragnb call cache'): LLM(cache_path=other)
    with ScriptedServer() as srv:
        use_endpoint(monkeypatch, srv.base_url)
        for f in (text, other):
            monkeypatch.setenv('RAGNB_CACHE_DIR', str(f.parent))
            assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '1']) == 1
            assert main(['show', str(RAGCHECKER/'checking_outputs.json'), '0', '--cache', str(f)]) == 1
        assert srv.requests == []
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(l.startswith(('ragnb generate: error: call cache', 'ragnb show: error: call cache')) for l in err), err
    assert str(text) in err[0] and str(other) in err[3]
    assert {p: p.read_bytes() for p in (text, other)} == before   # nothing written to them

def test_a_request_bomb_in_the_cache_is_not_inflated(tmp_path, capsys):
    with ScriptedServer() as srv:
        make_llm(srv, tmp_path).call(msg('hello'), item_id='0/response_claims')
    db = tmp_path/'c.sqlite'
    bomb = zlib.compress(b'{"messages": "' + b' ' * (64 << 20) + b'"}', 9)   # 64 MB of request, 64 KB stored
    assert len(bomb) < 1 << 17
    with sqlite3.connect(db) as c: assert c.execute('UPDATE requests SET body=?', (bomb,)).rowcount == 1
    with pytest.raises(ValueError, match='inflates past'): CallCache(db).traces('0/response_claims')
    assert main(['show', str(RAGCHECKER/'checking_outputs.json'), '0', '--cache', str(db)]) == 1
    err = capsys.readouterr().err
    assert f'ragnb show: error: call cache {db}: request of call' in err and 'inflates past' in err and 'Traceback' not in err

FULL = 32768   # bytes a file may grow to in the processes below: the cache's shared-memory file, and a few pages of log

def full_cache(d:Path) -> Path:
    "A call cache made in full, then left with no room to grow."
    c = CallCache(d/'calls.sqlite'); c.put('seed', {'text': 'x'}); c.checkpoint()
    return d/'calls.sqlite'

def test_a_full_cache_disk_keeps_the_replies(tmp_path):
    db = full_cache(tmp_path)
    with ScriptedServer() as srv:
        script = textwrap.dedent(f'''
            import json, warnings
            from ragnb.core.llm import LLM
            warnings.simplefilter('always')
            with warnings.catch_warnings(record=True) as w:
                llm = LLM(base_url={srv.base_url!r}, api_key='sk-test', model='m', cache_path={str(db)!r}, progress=False)
                res = llm.batch([[{{'role': 'user', 'content': f'question {{i}}: ' + 'x' * 3000}}] for i in range(20)])
                again = llm.call([{{'role': 'user', 'content': 'question 19: ' + 'x' * 3000}}])
            print(json.dumps({{'ok': sum(r.ok for r in res), 'kinds': [r.failure.kind for r in res if r.failure],
                              'errors': len(llm.cache_errors), 'warned': [str(x.message) for x in w],
                              'again_cached': again.cached, 'rows': len(llm.cache)}}))''')
        p = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (FULL, FULL)))
        n = len(srv.requests)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out['ok'], out['kinds'], n) == (20, [], 20), out   # every reply paid for is used
    assert out['errors'] > 0 and out['rows'] < 21 and out['again_cached'], out   # kept in memory for this run
    assert len(out['warned']) == 1 and str(db) in out['warned'][0] and 'not stored in the call cache' in out['warned'][0], out

def test_a_full_cache_disk_makes_the_command_fail_at_the_end(tmp_path):
    db = full_cache(tmp_path/'cache')
    with ScriptedServer() as srv:
        # no language check: py3langid unpacks its model to a temporary file, which the size limit would stop too
        p = ragnb_cli('generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2', '--keep-all',
                      '--no-language-check',
                      env={'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_CACHE_DIR': str(db.parent)},
                      limit=FULL)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count('not stored in the call cache') == 1 and str(db) in p.stderr
    assert f'write(s) to the call cache {db} failed' in p.stderr.splitlines()[-1]
    ds = Dataset.load(tmp_path/'qa.jsonl')
    assert len(ds) == 2 and not any(len(f) for f in ds.df.failures), ds.df.failures   # the run itself is whole
