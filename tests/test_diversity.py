"Diverse questions against ragnb's scripted server: types, linked passages, hop evidence, personas, language checks."
import argparse, json, re
import pytest
from ragnb.core.llm import LLM, Retries
from ragnb.core.calls import ParseError
from ragnb.testing.scripted import ScriptedServer
from ragnb.testing.rules import scripted_typed
from ragnb.core.samples import sample_path
from ragnb.docs.documents import Document, Chunk, load_folder, split_documents
from ragnb.synth.generate import generate_dataset, Dataset, sample_chunks, text_language, check_languages
from ragnb.synth.diversity import (QUESTION_TYPES, parse_question_types, allocate, parse_typed, parse_entities, parse_personas,
                             as_personas, link_chunks, noisy_terms, offline_terms, mixed_dataset, cost_by_type, mix_table,
                             outcome, scenarios, STYLES, LENGTHS, MixedQA, link_passages)
from ragnb.app.commands.testsets import add_cli
from ragnb.rag.retrieval import evaluate, BM25Retriever, by_question_type
from ragnb.view.widgets import highlight_spans, review_html

TYPES = 'factoid,multi_hop,comparative,reasoning,conditional'

def _llm(srv, path, **kw):
    return LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=path, progress=False,
               embed_model='scripted-embedding', **{'retries': Retries(backoff=0.01), **kw})

@pytest.fixture(scope='module')
def cookbook():
    return load_folder(sample_path('openai-cookbook'))

@pytest.fixture(scope='module')
def mixed(cookbook, tmp_path_factory):
    "A mixed set over 30 sampled cookbook passages, every type asked for."
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path_factory.mktemp('mixed')/'c.sqlite')
        ds = mixed_dataset(cookbook, llm, TYPES, max_chunks=30, seed=0)
        return ds, {p: len(srv.calls(p)) for p in ('chunk_entities', 'propose_personas', 'critique_single_hop', 'factoid_qa')}

def test_question_types_and_allocation():
    assert parse_question_types('factoid:2,multi_hop:1,comparative') == {'factoid': 2, 'multi_hop': 1, 'comparative': 1}
    assert parse_question_types(['multi-hop', 'reasoning:0.5']) == {'multi_hop': 1, 'reasoning': 0.5}
    with pytest.raises(ValueError, match="unknown question type 'trivia'"): parse_question_types('factoid,trivia')
    with pytest.raises(ValueError, match="weight 'x' is not a number"): parse_question_types('factoid:x')
    with pytest.raises(ValueError, match='no question type has a positive weight'): parse_question_types('factoid:0')
    assert allocate(10, {'factoid': 2, 'multi_hop': 1, 'comparative': 1, 'reasoning': 1}) == \
        {'factoid': 4, 'multi_hop': 2, 'comparative': 2, 'reasoning': 2}
    got = allocate(5, {'factoid': 100, 'conditional': 1})
    assert sum(got.values()) == 5 and got['conditional'] == 1  # a type asked for gets a question

def test_parse_typed_replies():
    r = parse_typed('Output:::\n**Question:** Why X?\nAnswer: Because Y.\nEvidence 1: "X is Y."\nEvidence 2: Z holds.', 2)
    assert r == {'question': 'Why X?', 'answer': 'Because Y.', 'evidence': ['X is Y.', 'Z holds.']}
    assert parse_typed('Question: Q?\nAnswer: A\nEvidence: E.', 1)['evidence'] == ['E.']
    with pytest.raises(ParseError, match="'Evidence 2:'"): parse_typed('Question: Q?\nAnswer: A\nEvidence 1: E.', 2)
    with pytest.raises(ParseError, match="'Question:', 'Answer:'"): parse_typed('I cannot help with that.', 1)

def test_parse_entities_and_personas():
    assert parse_entities('Entities:\n- Batch API\n- `gpt-4o`\n2. rate limits') == ['Batch API', 'gpt-4o', 'rate limits']
    assert parse_entities('Entities: HNSW; BM25, RRF') == ['HNSW', 'BM25', 'RRF']
    with pytest.raises(ParseError): parse_entities('')
    ps = parse_personas('1. **Persona:** Search engineer | builds retrieval\nPersona: QA lead | checks answers')
    assert [str(p) for p in ps] == ['Search engineer: builds retrieval', 'QA lead: checks answers']
    assert as_personas(['Student']) [0].description == ''
    with pytest.raises(ValueError, match='persona 1'): as_personas([': no name'])
    echo = 'Persona: (role name) | (what they need, in one sentence)\n\n1. **User**: | To find the guidelines.'
    with pytest.raises(ParseError, match="repeat the format's placeholders"): parse_personas(echo)  # a real reply
    assert [p.name for p in parse_personas(echo.replace('1. **User**:', 'Persona: User'))] == ['User']

def test_scenarios_cover_every_combination_evenly():
    ps = as_personas(['A: a', 'B: b'])
    sc = scenarios(len(ps) * len(STYLES) * len(LENGTHS), ps, seed=3)
    assert len(set(sc)) == len(sc) == 24
    assert {s for _, s, _ in sc[:4]} == set(STYLES)  # every style within the first four questions
    with pytest.raises(ValueError, match="unknown query style"): scenarios(2, ps, ['shouty'])

def _chunk(doc, i, text, start=None):
    return Chunk(text, doc, i, start if start is not None else 1000 * i)

def test_link_chunks_needs_a_shared_specific_entity_and_distinct_text():
    cs = [_chunk('a.md', 0, 'x' * 800), _chunk('a.md', 1, 'y' * 800, start=500), _chunk('b.md', 0, 'z'), _chunk('c.md', 0, 'w')]
    ents = {'a.md#0': ['Batch API', 'OpenAI'], 'a.md#1': ['Batch API'], 'b.md#0': ['batch APIs', 'OpenAI'], 'c.md#0': ['OpenAI']}
    links = link_chunks(cs, ents, None, noisy={'openai'})
    assert [l.chunks for l in links] == [('a.md#0', 'b.md#0'), ('a.md#1', 'b.md#0')]  # not a.md#0-a.md#1: their text overlaps
    assert links[0].shared == ['batch api'] and links[0].score > 0
    assert link_chunks(cs, ents, None, noisy={'openai'}, seeds={'a.md#1'})[0].chunks == ('a.md#1', 'b.md#0')
    assert noisy_terms({f'd{i}': ['OpenAI'] + (['HNSW'] if i < 2 else []) for i in range(20)}, min_count=2) == {'openai'}

def test_language_of_short_texts():
    assert text_language("Quelle est la limite de débit de l'API Batch ?", 'French').ok
    c = text_language('What is the rate limit of the Batch API?', 'fr')
    assert not c.ok and c.found == 'en' and c.expected == 'fr'
    assert text_language('`gpt-4o` 24 h', 'German').found is None      # too few prose words: not judged
    assert text_language('Wie hoch ist das Ratenlimit der Batch API?', 'Deutsch').found == 'de'
    with pytest.raises(ValueError, match="cannot check language 'Klingon'"): text_language('nuqneH', 'Klingon')

def test_every_type_in_a_mixed_cookbook_set(mixed):
    ds, calls = mixed
    d = ds.df
    assert set(QUESTION_TYPES) <= set(d.question_type), d.question_type.value_counts()
    assert set(QUESTION_TYPES) <= set(ds.kept.df.question_type)
    assert not ds.stats['shortfall'] and ds.stats['planned'] == {t: 6 for t in QUESTION_TYPES}
    for col in ('question_type', 'hops', 'persona', 'style', 'length', 'evidence', 'evidence_found', 'kept', 'drop_reason'):
        assert col in d
    f, o = d[d.question_type == 'factoid'], d[d.question_type != 'factoid']
    assert (f['style'] == 'web_search').all() and f.persona.isna().all() and (f.hops.map(len) == 1).all()
    assert o.persona.notna().all() and set(o['style']) == set(STYLES) and set(o['length']) == set(LENGTHS)
    assert calls['chunk_entities'] == ds.stats['entity_calls'] > 0 and calls['propose_personas'] == 1

def test_multi_hop_rows_have_evidence_in_each_of_their_passages(mixed, cookbook):
    ds, _ = mixed
    texts = {d.id: d.text for d in cookbook}
    chunks = {c.id: c for c in split_documents(cookbook)}
    multi = ds.df[ds.df.question_type == 'multi_hop']
    good = multi[multi.evidence_found]
    assert len(good) >= 3
    for r in good.to_dict('records'):
        assert len({h['chunk_id'] for h in r['hops']}) == len(r['hops']) >= 2       # two or three different passages
        for h in r['hops']:
            c = chunks[h['chunk_id']]
            assert h['evidence_found'] and c.start_index <= h['evidence_start'] < h['evidence_end'] <= c.end_index
            assert texts[h['doc_id']][h['evidence_start']:h['evidence_end']].split()[:2] == h['evidence'].split()[:2]
    assert any(len(h) == 3 for h in multi.hops)
    assert any(len({x['doc_id'] for x in h}) > 1 for h in good.hops)                 # across documents
    # the row is found only when every hop is
    for r in ds.df[ds.df.hops.map(len) > 1].to_dict('records'):
        assert r['evidence_found'] == all(h['evidence_found'] for h in r['hops'])

def test_single_hop_check_drops_questions_one_passage_answers(mixed):
    ds, calls = mixed
    d = ds.df
    multi = d[d.hops.map(len) > 1]
    assert calls['critique_single_hop'] == multi.hops.map(len).sum()                 # one check per hop
    alone = d[d.drop_reason.fillna('').str.contains('answerable from hop')]
    assert len(alone) and (alone.single_hop_score >= 4).all() and (alone.hops.map(len) > 1).all()
    assert (ds.kept.df[ds.kept.df.hops.map(len) > 1].single_hop_score < 4).all()
    assert d[d.hops.map(len) == 1].single_hop_score.isna().all()

def test_cost_and_mix_tables(mixed):
    ds, _ = mixed
    c = cost_by_type(ds)
    assert list(c.index) == list(QUESTION_TYPES)
    assert c.calls.sum() == ds.df.calls.sum()
    assert c.shared_calls.sum() == pytest.approx(ds.stats['entity_calls'] + ds.stats['embedding_calls'] + 1, abs=0.2)
    assert (c.loc['multi_hop', 'calls_per_question'] > c.loc['factoid', 'calls_per_question'])
    t = mix_table(ds)
    assert t.values.sum() == len(ds) and t['kept'].sum() == ds.counts()['kept']
    assert outcome({'kept': False, 'question': 'q', 'drop_reason': 'language: question in en (p=0.9), not fr'}) == 'language'

def test_retrieval_by_question_type(mixed, cookbook):
    ds, _ = mixed
    rep = evaluate(ds, split_documents(cookbook, 1000, 200), BM25Retriever(), ks=(1, 5, 10))
    t = by_question_type(rep, [5, 10])
    assert set(t.index) == set(ds.kept.df.question_type)
    lost = ds.df.assign(evidence='nowhere to be found', evidence_start=None, evidence_end=None)
    none = evaluate(lost, split_documents(cookbook, 1000, 200), BM25Retriever(), ks=(5,))
    with pytest.raises(ValueError, match=r'no question was scored \(\d+ without ground truth'):
        by_question_type(none)
    assert (t['all-hops@5'] <= t['hit@5']).all() and (t['hit@5'] <= t['hit@10']).all()
    single = rep.per_question[rep.per_question.n_hops == 1]
    assert (single['any_hop@5'] == single['all_hops@5']).all()

def _english_multi_hop(call, rng):
    "A model that writes its multi-hop questions in English, whatever language is asked for (ragas #1435)."
    reply = scripted_typed(call, rng)
    return re.sub(r'(?m)^(\**Question:\**) .*$', r'\1 How do these two search settings differ when the index gets large?', reply)

def test_language_check_drops_a_planted_english_row(tmp_path):
    docs = load_folder(sample_path('multilingual', 'fr'))
    with ScriptedServer(rules={'multi_hop_qa': _english_multi_hop}) as srv:
        ds = mixed_dataset(docs, _llm(srv, tmp_path/'c.sqlite'), 'factoid,multi_hop,reasoning', language='French',
                           chunk_size=600, chunk_overlap=0, seed=0)
    d = ds.df
    planted = d[(d.question_type == 'multi_hop') & (d.question_language == 'en')]
    assert len(planted) >= 1 and not planted.kept.any()
    assert planted.drop_reason.str.startswith('language: question in en').all()
    assert planted.groundedness_score.isna().all()          # not critiqued: no calls spent on it
    others = d[d.question_type != 'multi_hop']
    assert (others.question_language.dropna() == 'fr').all() and others.kept.any()

def test_german_corpus_keeps_german_rows(tmp_path):
    docs = load_folder(sample_path('multilingual', 'de'))
    with ScriptedServer() as srv:
        ds = mixed_dataset(docs, _llm(srv, tmp_path/'c.sqlite'), TYPES, language='German', chunk_size=500, chunk_overlap=0,
                           seed=0, personas=['Suchentwickler: baut eine Suche'])
    d = ds.df
    assert len(d) and ds.kept.df.question_language.dropna().eq('de').all()
    assert (d.persona == 'Suchentwickler: baut eine Suche').sum() == (d.question_type != 'factoid').sum()
    lang = d[d.drop_reason.fillna('').str.startswith('language:')]
    assert (lang.question_language.ne('de') | lang.answer_language.ne('de')).all()

def test_check_languages_on_plain_factoids():
    from ragnb.synth.generate import QA
    qs = [QA('a/q0', 'a', 'a', 'a#0', 0, 'ctx', question='Comment fonctionne la recherche hybride avec BM25 ?',
             answer='Elle combine BM25 et les embeddings.', kept=True),
          QA('b/q0', 'b', 'b', 'b#0', 0, 'ctx', question='How does hybrid search work with BM25?',
             answer='It combines BM25 with dense embeddings of every passage.', kept=True, groundedness_score=5, drop_reason=None)]
    check_languages(qs, 'French')
    assert qs[0].kept and not qs[1].kept and qs[1].drop_reason.startswith('language: question in en')
    assert 'answer in en' in qs[1].drop_reason

def test_failed_entity_and_embedding_calls_fall_back(tmp_path, cookbook):
    def broken(call, rng): raise RuntimeError('entity model down')
    with ScriptedServer(rules={'chunk_entities': broken}) as srv:
        llm = _llm(srv, tmp_path/'c.sqlite', retries=Retries(backoff=0.01, max_retries=0))
        ds = mixed_dataset(cookbook, llm, 'multi_hop', max_chunks=12, seed=1, personas=['Developer: builds apps'])
    s = ds.stats
    assert s['entity_fallbacks'] == s['entity_calls'] > 0 and s['failed_calls'] >= s['entity_calls']
    assert s['links'] > 0 and (ds.df.hops.map(len) >= 2).all()    # offline terms still link passages
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path/'r.sqlite', replay=True)           # replay with an empty cache: every call misses
        ds = mixed_dataset(cookbook, llm, 'multi_hop', max_chunks=12, seed=1, personas=['Developer: builds apps'])
    assert 'replay mode' in ds.stats['embedding_failure'] and ds.stats['entity_fallbacks'] == ds.stats['entity_calls']
    assert ds.counts()['failed'] == len(ds) and all(f[0]['kind'] == 'replay_miss' for f in ds.df.failures)

def test_embeddings_from_another_model(tmp_path, cookbook):
    "`embedder=`: a chat model that serves no embeddings links passages by another model's vectors."
    every = split_documents(cookbook, 1000, 100)
    seeds = sample_chunks(every, 5, seed=0)
    with ScriptedServer() as srv:
        chat = _llm(srv, tmp_path/'r.sqlite', replay=True)  # an empty replay cache: no entities, no vectors
        st0, st1 = {}, {}
        _, alone = link_passages(every, seeds, 2, chat, stats=st0)
        _, linked = link_passages(every, seeds, 2, chat, stats=st1, embedder=_llm(srv, tmp_path/'v.sqlite'))
        embeds = [r for r in srv.requests if r['path'].rstrip('/').endswith('/embeddings')]
    assert 'replay mode' in st0['embedding_failure'] and all(l.similarity == 0 for l in alone)
    assert 'embedding_failure' not in st1 and st1['embedding_calls'] == 1 == len(embeds)
    assert [l.chunks for l in alone] and any(l.similarity != 0 for l in linked)

def test_mixed_dataset_and_cli_take_question_types(tmp_path, cookbook, monkeypatch):
    with ScriptedServer() as srv:
        llm = _llm(srv, tmp_path/'c.sqlite')
        ds = mixed_dataset(cookbook, llm, 'factoid:1,conditional:1', max_chunks=10, styles=['misspelled'],
                           lengths=['short'], personas=['Student: learns'])
        assert set(ds.df.question_type) == {'factoid', 'conditional'}
        assert set(ds.df[ds.df.question_type == 'conditional']['style']) == {'misspelled'}
        plain = generate_dataset(cookbook, llm, max_chunks=4)
        assert 'question_type' not in plain.df and 'hops' not in plain.df          # the seed's flow is unchanged
        p = argparse.ArgumentParser(); add_cli(p.add_subparsers())
        out = tmp_path/'qa.jsonl'
        args = p.parse_args(['generate', str(sample_path('openai-cookbook')), '--out', str(out), '--max-chunks', '6',
                             '--question-types', 'factoid,comparative:2', '--personas', 'Student: learns; QA lead: checks',
                             '--keep-all'])
        for k, v in dict(OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY='test', RAGNB_MODEL='scripted-test-model',
                         RAGNB_EMBED_MODEL='scripted-embedding').items(): monkeypatch.setenv(k, v)
        assert args.func(args) == 0
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert {r['question_type'] for r in rows} == {'factoid', 'comparative'}
    assert {r['persona'] for r in rows if r['question_type'] == 'comparative'} <= {'Student: learns', 'QA lead: checks'}
    assert all(isinstance(r['hops'], list) and r['hops'] for r in rows)
    with pytest.raises(ValueError, match='unknown question type'):
        mixed_dataset(cookbook[:2], LLM(base_url='http://127.0.0.1:9', api_key='x'), 'trivia')

def test_hops_survive_parquet_and_show_highlighted(mixed, tmp_path):
    ds, _ = mixed
    back = Dataset.load(ds.save(tmp_path/'qa.parquet'))
    assert back.df.hops.tolist() == ds.df.hops.tolist() and back.df.question_type.tolist() == ds.df.question_type.tolist()
    row = ds.df[(ds.df.hops.map(len) == 3) & ds.df.evidence_found].iloc[0]
    page = review_html(row, 0)
    assert all(f'title="hop {i}"><sup>{i}</sup>' in page for i in (1, 2, 3)) and 'not found' not in page
    rejected = row.copy()
    rejected['hops'] = [dict(h, evidence_found=(k != 1)) for k, h in enumerate(row.hops)]   # hop 2 not accepted
    page = review_html(rejected, 0)
    assert 'title="hop 2"><sup>2</sup>' not in page and 'evidence of hop 2 not found' in page
    html = highlight_spans('<1-hop>\nA is B.\n\n<2-hop>\nC <b>is</b> D.', ['A is B.', 'nowhere to be seen', 'C <b>is</b> D.'])
    assert html.count('<mark') == 2 and 'evidence of hop 2 not found' in html and '&lt;b&gt;' in html
    long = 'x ' * 2000 + 'A is B here. ' + 'y ' * 2000 + 'C is D there.'
    shown = highlight_spans(long, ['A is B here.', 'C is D there.'])       # two windows, the rest said in words
    assert shown.count('title="hop 1"') == shown.count('title="hop 2"') == 2 and 'characters]' in shown and '<details>' in shown

def test_retrieval_cli_reports_by_question_type(mixed, tmp_path, capsys):
    from ragnb.app.cli import main
    ds, _ = mixed
    path = ds.save(tmp_path/'mixed.jsonl')
    assert main(['retrieval', str(path), '--docs', str(sample_path('openai-cookbook')), '--k', '1,5']) == 0
    out = capsys.readouterr().out
    assert 'by question type' in out and 'all-hops@5' in out and 'multi_hop' in out
