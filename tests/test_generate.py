"Synthetic QA against ragnb's scripted test server: parsing, grounding, critiques, failures, the CLI."
import argparse, json, random
from pathlib import Path
import pytest
from ragnb.core.llm import LLM, Retries
from ragnb.core.calls import ParseError
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.prompts import get_prompt
from ragnb.docs.documents import Document, load_folder, split_document, split_documents
from ragnb.docs.evidence import locate, ground, normalise
from ragnb.synth.generate import (parse_factoid, parse_rating, generate_questions, critique, select, generate_dataset,
                            Dataset, QA, SEED_EXAMPLE, CRITERIA)
from ragnb.app.commands.testsets import add_cli  # `ragnb generate` lives above both dataset builders
from ragnb.testing.rules import scripted_factoid
from ragnb.core.samples import sample_path

COOKBOOK = sample_path('openai-cookbook')

DE = Document("""# Einführung in Vektordatenbanken

Eine Vektordatenbank speichert Einbettungen als Vektoren mit vielen Dimensionen.
Die Suche nach ähnlichen Vektoren ist die wichtigste Operation einer solchen Datenbank.
Der Index HNSW ist ein Graph, der die Suche auch bei Millionen von Einträgen schnell macht.
""", 'mem', 'de/vektoren.md', 'vektoren.md', '.md')

EN = Document("""# Rate limits

The API enforces rate limits on requests per minute and tokens per minute for every organization.
A request that exceeds the limit is answered with status code 429 and a Retry-After header.
The Batch API is a separate endpoint that accepts large jobs and returns results within 24 hours.
""", 'mem', 'limits.md', 'limits.md', '.md')

def _llm(srv, tmp_path, **kw):
    return LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
               progress=False, **{'retries': Retries(backoff=0.01), **kw})

def test_parse_factoid_variants():
    assert parse_factoid('Output:::\nFactoid question:  What is X? \nAnswer: "Y"\nEvidence: X is Y.') == \
        {'question': 'What is X?', 'answer': 'Y', 'evidence': 'X is Y.'}
    got = parse_factoid('Preamble.\nOutput:::\n**Factoid question:** What\n is X?\n__Answer:__ Y\n**Evidence:** “X is Y.”\n\nOutput:::')
    assert got == {'question': 'What is X?', 'answer': 'Y', 'evidence': 'X is Y.'}
    with pytest.raises(ParseError, match="'Answer:'"): parse_factoid('Output:::\nFactoid question: Q?\nEvidence: E.')
    with pytest.raises(ParseError, match="'Factoid question:'"): parse_factoid('Factoid question:\nAnswer: a\nEvidence: e')
    assert parse_factoid('Output::: Factoid question: What is X? Answer: Y. Evidence: X is Y.') == \
        {'question': 'What is X?', 'answer': 'Y.', 'evidence': 'X is Y.'}

def test_parse_rating_variants():
    assert parse_rating('Answer:::\nEvaluation: ok.\nTotal rating: 4').score == 4
    assert parse_rating('**Evaluation:** ok\n**Total rating:** 2/5').score == 2
    assert parse_rating('Evaluation: first\nTotal rating: 2\nOn reflection\nTotal rating: 3').score == 3
    for bad, msg in [('Evaluation: x\nTotal rating: 0', 'outside'), ('Evaluation: x\nTotal rating: 6', 'outside'),
                     ('Evaluation: x\nTotal rating: four', "no 'Total rating:'"), ('Total rating: 3', "no 'Evaluation:'"),
                     ('Evaluation: x\nTotal rating: 3.5', 'whole number')]:
        with pytest.raises(ParseError, match=msg): parse_rating(bad)

def test_locate_methods_and_offsets():
    text = 'Intro.\n\nThe  **Batch API** accepts\nlarge jobs — and “returns” results within 24 hours.\n'
    for ev, method in [('accepts\nlarge jobs', 'exact'), ('the batch api accepts large jobs - and "returns" results', 'normalised'),
                       ('The Batch API accepts big jobs - and returns results within 24 hours.', 'fuzzy')]:
        m = locate(ev, text)
        assert m.method == method
        assert text[m.start:m.end].lower().startswith(ev.split()[0].lower()) and m.end <= len(text)
    assert locate('Completely unrelated statement about rivers and mountains.', text) is None
    assert locate('24 hour', text, threshold=90).method == 'exact' and locate('24 hrs', text) is None

def test_ground_uses_document_offsets():
    chunks = split_document(EN, chunk_size=120, chunk_overlap=0)
    c = chunks[-1]
    ev = 'The Batch API is a separate endpoint that accepts large jobs'
    m = ground(ev, c, EN)
    assert EN.text[m.start:m.end] == ev and m.start >= c.start_index
    other = ground('The API enforces rate limits on requests per minute', c, EN)  # not in this chunk, found in the document
    assert other is not None and other.start < c.start_index

def test_generate_english_and_non_english(tmp_path):
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path)
        qs = generate_questions(split_documents([EN, DE]), llm, [EN, DE], n_per_chunk=2, language='German')
        assert len(qs) == 4 and all(q.question for q in qs)
        de = [q for q in qs if q.doc_id == 'de/vektoren.md']
        assert all(q.question.startswith('Was ') for q in de)
        for q in qs:
            assert q.evidence_found and q.generator_prompt.startswith('factoid_qa')
            doc = EN if q.doc_id == 'limits.md' else DE
            assert doc.text[q.evidence_start:q.evidence_end].replace('*', '') != ''
        assert de[0].evidence != de[1].evidence  # the follow-up turn asks about a different fact
        prompts = [r['prompt'] for r in srv.calls()]
        assert prompts.count('factoid_qa@1') == 2 and prompts.count('factoid_qa_next@1') == 2
        assert 'in German' in srv.calls('factoid_qa')[0]['body']['messages'][-1]['content']

def _rule(reply):
    return lambda messages, rng: reply

def test_evidence_not_in_context_is_flagged(tmp_path):
    rules = {'factoid_qa': _rule('Output:::\nFactoid question: When was the API launched?\nAnswer: 2020\n'
                                 'Evidence: The API was launched in June 2020 to a small group of testers.')}
    with ScriptedServer(rules=rules) as srv:
        ds = generate_dataset([EN], _llm(srv, tmp_path), require_evidence=True)
    row = ds.df.iloc[0]
    assert not row.evidence_found and row.evidence_start is pd_na() and 'evidence not found' in row.drop_reason
    assert not row.kept

def pd_na():
    import pandas as pd
    return pd.NA

def test_malformed_and_failed_calls_are_recorded(tmp_path):
    docs = [Document(f'# Doc {i}\n\nThe service number {i} stores embeddings in a vector database for search.\n', 'mem',
                     f'd{i}.md', f'd{i}.md', '.md') for i in range(30)]
    with ScriptedServer(malformed=0.3, faults={'500': 0.1}, seed=3) as srv:
        ds = generate_dataset(docs, _llm(srv, tmp_path, retries=Retries(backoff=0.01, max_retries=0)))
    df = ds.df
    assert len(df) == 30
    gen_failed = df[df.question.isna()]
    assert len(gen_failed) > 0
    for fs in gen_failed.failures: assert fs and fs[0]['stage'] == 'generate' and fs[0]['kind'] in ('parse', 'server_error')
    crit_failed = df[df.question.notna() & (df.failures.map(len) > 0)]
    assert len(crit_failed) > 0 and all(not k for k in crit_failed.kept)
    assert all('critique failed' in r for r in crit_failed.drop_reason)
    assert any(f['kind'] == 'parse' and f['raw'] for fs in df.failures for f in fs)
    assert ds.stats['failed_calls'] == sum(len(f) for f in df.failures)
    c = ds.counts()
    assert c['kept'] + c['dropped'] + c['failed'] == 30 and c['failed'] == len(ds.failed)

def test_out_of_range_rating_is_a_failure(tmp_path):
    rules = {'critique_relevance': _rule('Answer:::\nEvaluation: Very useful.\nTotal rating: 9')}
    with ScriptedServer(rules=rules) as srv:
        ds = generate_dataset([EN], _llm(srv, tmp_path))
    row = ds.df.iloc[0]
    assert row.relevance_score is pd_na() and row.groundedness_score is not pd_na()
    assert row.failures[0]['stage'] == 'critique_relevance' and 'outside 1-5' in row.failures[0]['message']

def test_dedupe_in_blocks(monkeypatch):
    import ragnb.synth.generate as g
    def q(i, text): return QA(f'c#{i}/q0', 'd', 'd', f'c#{i}', 0, 'ctx', question=text, answer='a', evidence='e',
                              evidence_found=True, groundedness_score=5, relevance_score=5, standalone_score=5)
    topics = ['embeddings', 'rate limits', 'fine-tuning', 'the Batch API', 'structured outputs', 'function calling', 'vision']
    texts = [f'What is {t}?' for t in topics] + [f'what is {t}' for t in topics]  # second half duplicates the first
    full = [x.kept for x in select([q(i, t) for i, t in enumerate(texts)])]
    monkeypatch.setattr(g, 'DEDUPE_BLOCK', 3)
    small = select([q(i, t) for i, t in enumerate(texts)])
    assert [x.kept for x in small] == full and sum(full) == len(topics)
    assert all(x.drop_reason.startswith('near-duplicate of c#') for x in small if not x.kept)

def test_select_thresholds_and_dedupe():
    def q(i, text, g=5, r=5, s=5):
        return QA(f'c#{i}/q0', 'd', 'd', f'c#{i}', 0, 'ctx', question=text, answer='a', evidence='e', evidence_found=True,
                  groundedness_score=g, relevance_score=r, standalone_score=s)
    qs = [q(0, 'What is the Batch API?', 4, 4, 4), q(1, 'What is the batch API', 5, 5, 5), q(2, 'How long do batch jobs take?', 5, 2, 5),
          q(3, 'What does HNSW stand for?', 3, 3, 3)]
    select(qs)
    assert [x.kept for x in qs] == [False, True, False, True]
    assert qs[0].drop_reason == 'near-duplicate of c#1/q0 (100)' and qs[2].drop_reason == 'relevance 2 < 3'
    select(qs, min_score=4, dedupe=None)
    assert [x.kept for x in qs] == [True, True, False, False]
    select(qs, thresholds={'relevance': 1}, dedupe=None)
    assert [x.kept for x in qs] == [True, True, True, True]

def test_seed_example_on_contributing(tmp_path):
    docs = load_folder(COOKBOOK, glob='CONTRIBUTING.md')
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path)
        qs = select(critique(generate_questions(split_documents(docs), llm, docs, n_per_chunk=3), llm), require_evidence=False)
    assert [(x.question, (x.groundedness_score, x.relevance_score, x.standalone_score)) for x in qs] == list(SEED_EXAMPLE.items())
    assert [x.kept for x in qs] == [True, False, True] and 'relevance 2 < 3' in qs[1].drop_reason  # the article's rule
    assert [x.kept for x in select(qs)] == [False] * 3  # by default: the scripted evidence is not in this snapshot
    assert all('evidence not found in the passage' in x.drop_reason for x in qs)

def test_cookbook_sample_dataset_roundtrip_and_exports(tmp_path):
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path)
        ds = generate_dataset(COOKBOOK, llm, max_chunks=25, seed=7)
        n = len(srv.calls())
        again = generate_dataset(COOKBOOK, llm, max_chunks=25, seed=7)  # the same sample, all from the cache
        assert len(srv.calls()) == n and again.stats['cached'] == again.stats['calls']
    assert ds.stats['chunks'] == 25 and ds.stats['calls'] == n
    assert 0 < ds.counts()['kept'] < 25
    assert again.df.question.tolist() == ds.df.question.tolist()
    for name in ('x.jsonl', 'x.parquet'):
        back = Dataset.load(ds.save(tmp_path/name))
        assert back.df.drop(columns='failures').equals(ds.df.drop(columns='failures')) and back.df.failures.tolist() == ds.df.failures.tolist()
    rows = [json.loads(l) for l in (tmp_path/'x.jsonl').read_text().splitlines()]
    need = {'source_doc', 'context', 'question', 'answer', 'evidence', 'evidence_found', 'groundedness_score', 'relevance_score',
            'standalone_score', 'groundedness_eval', 'relevance_eval', 'standalone_eval', 'evidence_start', 'evidence_end'}
    assert need <= set(rows[0])
    ragas = ds.to_ragas()
    assert list(ragas.columns) == ['user_input', 'reference', 'reference_contexts'] and len(ragas) == ds.counts()['kept']
    assert all(isinstance(c, list) and c for c in ragas.reference_contexts)
    rc = ds.to_ragchecker()['results']
    assert {tuple(sorted(r)) for r in rc} == {('gt_answer', 'query', 'query_id')} and len(rc) == ds.counts()['kept']
    html = ds._repr_html_()
    assert '<table' in html and '<script' not in html

def test_render_escapes_model_html():
    q = QA('c#0/q0', 'd', 'd', 'c#0', 0, 'ctx', question='What is <script>alert(1)</script>?', answer='<b>x</b>', evidence='e')
    md = q._repr_markdown_()
    assert '<script>' not in md and '&lt;script&gt;' in md
    ds = Dataset.from_records([q])
    assert '<script>' not in ds._repr_html_()

def test_cli_generate(tmp_path, monkeypatch, capsys):
    src = tmp_path/'docs'; src.mkdir()
    (src/'limits.md').write_text(EN.text); (src/'de.md').write_text(DE.text); (src/'bad.md').write_bytes(b'\x00\x01')
    parser = argparse.ArgumentParser(prog='ragnb'); add_cli(parser.add_subparsers())
    with ScriptedServer() as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'test')
        monkeypatch.setenv('RAGNB_MODEL', 'scripted-test-model'); monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
        out = tmp_path/'qa.jsonl'
        args = parser.parse_args(['generate', str(src), '--out', str(out), '--keep-all', '--concurrency', '4', '--min-score', '1'])
        assert args.func(args) == 0
    printed = capsys.readouterr()
    for label in ('chunks: 2', 'questions: 2', 'kept:', 'dropped:', 'failed: 0', 'calls: 8', 'tokens:'):
        assert label in printed.out
    assert 'bad.md' in printed.err
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(rows) == 2 and {r['source_doc'] for r in rows} == {'limits.md', 'de.md'}

from hypothesis import given, settings, strategies as st


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('aZ *_-\n\t\u00a0“”‘’—İßé.') + ['x', 'Y']), max_size=60))
def test_normalise_maps_back(text):
    out, pos = normalise(text)
    pos = pos.tolist()  # offsets come as a compact integer array
    assert len(out) == len(pos) and pos == sorted(set(pos))
    assert '*' not in out and '_' not in out and '  ' not in out and out == out.strip()
    plain = {'“': '"', '”': '"', '‘': "'", '’': "'", '—': '-'}
    for c, p in zip(out, pos):
        src = text[p]
        if c == ' ': assert src.isspace()
        else: assert c == (plain.get(src, src).lower() if len(src.lower()) == 1 else src)


def test_structured_questions_and_ratings_through_a_schema_and_without(tmp_path):
    from ragnb.synth.generate import critic_consistency
    chunks = split_document(EN, 3000, 0)
    with ScriptedServer() as srv, ScriptedServer(structured='refuse') as plain:
        got = {}
        for s in (srv, plain):
            ds = generate_dataset([EN], _llm(s, tmp_path/s.structured), structured=True)
            sent = {(q['prompt'].split('@')[0], (q['body'].get('response_format') or {}).get('type')) for q in s.requests}
            got[s.structured] = (ds, sent)
        from ragnb.synth.generate import factoid_request
        rq = factoid_request(chunks[0], 'English', [], 0, structured=True)
        r = _llm(srv, tmp_path/'x').call(rq.messages, rq.prompt, 'x', rq.parse, schema=rq.schema)
        assert r.ok and json.loads(r.text)['question'] == r.value['question']   # the reply was JSON; the parser read it
    ds, sent = got['json_schema']
    assert {t for _, t in sent} == {'json_schema'} and ds.counts()['failed'] == 0 and ds.counts()['questions'] == 1
    ds2, sent2 = got['refuse']
    assert ds2.counts()['failed'] == 0 and ds2.df.question.tolist() == ds.df.question.tolist()
    assert ds2.df.groundedness_score.tolist() == ds.df.groundedness_score.tolist()


def test_self_consistency_with_a_second_critic_and_agreement_with_review(tmp_path):
    from ragnb.synth.generate import critic_consistency, critic_agreement
    harsh = {'critique_groundedness': lambda m, rng: 'Evaluation: Not answerable.\nTotal rating: 1'}
    with ScriptedServer() as srv, ScriptedServer(rules=harsh) as other:
        qs = generate_questions(split_document(EN, 200, 0), _llm(srv, tmp_path))
        critique(qs, _llm(srv, tmp_path), samples=2, second_critic=_llm(other, tmp_path/'o'))
        assert all((r['body']['temperature'], r['body'].get('seed')) in {(0.0, None), (0.7, 1)} for r in srv.requests if 'critique' in (r['prompt'] or ''))
    q = next(q for q in qs if q.question)
    assert len(q.groundedness_votes) == 3 and q.groundedness_votes[-1] == 1 and q.groundedness_votes[0] == q.groundedness_score
    cc = critic_consistency(qs)
    assert cc.loc['groundedness', 'keep_split'] > 0 and cc.loc['relevance', 'identical'] == 1.0   # the scripted server is deterministic
    select(qs, require_consistent=True)
    assert all(not q.kept and 'groundedness votes disagree' in q.drop_reason for q in qs if q.question and q.groundedness_score >= 3)
    df = Dataset.from_records(qs).df
    df['review'] = ['accept' if i % 2 == 0 else 'reject' for i in range(len(df))]
    ag = critic_agreement(df)
    assert set(ag.index) == {'groundedness', 'relevance', 'standalone', 'kept (all criteria)'} and (ag.reviewed == df.question.notna().sum()).all()
    back = Dataset.load(Dataset.from_records(qs).save(tmp_path/'v.parquet'))
    assert back.df.groundedness_votes.map(list).tolist() == df.groundedness_votes.tolist()


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
from ragnb.app.cli import main

# Issue 40, item 4 (hostile round 3): Unicode forms (a decomposed document, a composed quote) --------------------------
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

# Issue 40, item 7 (hostile round 3): non-text content in a reply ------------------------------------------------------
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
