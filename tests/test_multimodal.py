"Behaviour of ragnb.synth.multimodal: contexts, evidence ids that must exist, critique and rows through the test server."
from pathlib import Path
import pandas as pd, pytest
from ragnb.core.llm import LLM
from ragnb.core.calls import ParseError
from ragnb.synth.multimodal import (build_context, context_messages, context_text, multimodal_dataset, multimodal_questions,
                              parse_multimodal)
from ragnb.docs.pdf import parse_pdf, pdf_regions, render_regions
from ragnb.docs.pages import Segment
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path

DOCS = sample_path('documents')
EU004 = DOCS/'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/eu-004.pdf'
TABLE = '<table><tr><th></th><th>Outlets (000)</th></tr><tr><td>Germany</td><td>415.3</td></tr></table>'

def llm_for(srv, tmp_path):
    return LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite', progress=False)

def png(tmp_path):
    import pymupdf
    doc = pymupdf.open(); pg = doc.new_page(width=100, height=60); pg.insert_text((10, 30), 'chart')
    f = tmp_path/'d_1_1.png'; pg.get_pixmap().save(f)
    return f

def test_build_context_numbers_parts_in_order(tmp_path):
    emf = tmp_path/'pic.emf'; emf.write_bytes(b'\x01\x00\x00\x00')
    segs = [Segment('text', 'Intro.'), Segment('table', TABLE, 'table_7'), Segment('image', str(emf), 'pic.emf'),
            Segment('image', str(png(tmp_path)), 'd_1_1.png'), Segment('text', '  '), Segment('table', TABLE, 'table_9')]
    parts = build_context(segs)
    assert [(p.kind, p.id, p.source) for p in parts] == [('text', None, None), ('table', 'table_1', 'table_7'),
                                                          ('image', 'image_1', 'd_1_1.png'), ('table', 'table_2', 'table_9')]
    content = context_messages(parts)[-1]['content']
    assert [c['type'] for c in content] == ['text', 'text', 'text', 'text', 'image_url', 'text']
    assert content[2]['text'].startswith('table_1:\n<table>') and content[3]['text'] == 'image_1:'
    assert content[4]['image_url']['url'].startswith('data:image/png;base64,')
    assert 'image_1: (an image)' in context_text(parts) and 'table_2:\n<table>' in context_text(parts)

def test_parse_multimodal_evidence():
    r = "Output:::\nFactoid question: How many outlets did Germany have?\nAnswer: 415,300\nEvidence: {}"
    assert parse_multimodal(r.format('`Table 1`'), {'table_1'}) | {} == dict(
        question='How many outlets did Germany have?', answer='415,300', evidence='table_1', modality='table')
    assert parse_multimodal(r.format('image_2'), {'table_1', 'image_2'})['modality'] == 'image'
    assert parse_multimodal(r.format('Germany has 415,300 outlets.'), {'table_1'})['modality'] == 'text'
    with pytest.raises(ParseError, match='image_3, which is not in the context'):
        parse_multimodal(r.format('image_3'), {'table_1', 'image_2'})
    with pytest.raises(ParseError): parse_multimodal('Factoid question: x?\nAnswer: y', {'table_1'})

def test_table_question_through_test_server(tmp_path):
    parsed = parse_pdf(EU004, tmp_path/'p', offline=True, pages=[2, 3], page_zoom=0.5, crop_zoom=0.5)
    with ScriptedServer() as srv:
        ds = multimodal_dataset(parsed, llm_for(srv, tmp_path))
        assert len(srv.calls('multimodal_qa')) == 2
        assert {c['prompt'].split('@')[0] for c in srv.calls()} >= {'multimodal_qa', 'critique_groundedness', 'critique_relevance', 'critique_standalone'}
    df = ds.df
    assert list(df.chunk_id) == [f'{parsed.doc}/p2', f'{parsed.doc}/p3']
    assert set(df.evidence_modality) == {'table'}
    for _, r in df.iterrows():
        assert r.evidence in r.context_ids and r.answer in r.evidence_content and r.evidence_found
        assert r.groundedness_score is not None and r.relevance_score is not None and r.standalone_score is not None
    assert df.context_ids.tolist() == [['table_1', 'table_2'], ['table_1']]
    assert ds.stats['calls'] == 2 + 2*3 and ds.stats['failed_calls'] == 0 and ds.stats['prompt_tokens'] > 0

def test_missing_evidence_id_is_a_recorded_failure(tmp_path):
    parsed = parse_pdf(EU004, tmp_path/'p', offline=True, pages=[2, 3], page_zoom=0.5, crop_zoom=0.5)
    def rule(call, rng):  # cites table_2 where it exists, an absent table_5 where it does not
        texts = [c.get('text', '') for c in call.messages[-1]['content']]
        name = 'table_2' if any(t.startswith('table_2:') for t in texts) else 'table_5'
        return f"Output:::\nFactoid question: What is the number of outlets in Greece?\nAnswer: 54\nEvidence: {name}"
    with ScriptedServer(rules={'multimodal_qa': rule}) as srv:
        ds = multimodal_dataset(parsed, llm_for(srv, tmp_path))
    ok, bad = ds.df.iloc[0], ds.df.iloc[1]
    assert ok.evidence == 'table_2' and not ok.failures
    assert pd.isna(bad.question) and bad.failures[0]['kind'] == 'parse' and 'table_5' in bad.failures[0]['message']
    assert 'table_5' in bad.failures[0]['raw'] and not bad.kept and bad.drop_reason.startswith('generation failed')

def test_image_and_text_evidence(tmp_path):
    img = [Segment('image', str(png(tmp_path)), 'd_1_1.png', 1)]
    text = [Segment('text', 'The retail sector is the largest employer in the European Union with 22 million workers.', page=2)]
    with ScriptedServer() as srv:
        qs = multimodal_questions(img + text, llm_for(srv, tmp_path))
        bodies = [c['body'] for c in srv.calls('multimodal_qa')]  # the two contexts run concurrently: any order
    assert sorted(any(c['type'] == 'image_url' for c in b['messages'][-1]['content']) for b in bodies) == [False, True]
    assert [q.evidence_modality for q in qs] == ['image', 'text']
    assert qs[0].evidence == 'image_1' and qs[0].evidence_content.endswith('d_1_1.png')
    assert qs[1].evidence_found and qs[1].evidence_match in ('exact', 'normalised')
