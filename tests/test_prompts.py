"The labelled-reply protocol (`Output:::` then `Label: value` fields): one reader for every stage and the scripted server."
import re
import pytest
from ragnb.core.prompts import labelled_fields
from ragnb.synth.generate import parse_factoid
from ragnb.synth.diversity import parse_typed
from ragnb.core.calls import ParseError
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.llm import LLM

LAB = re.compile(r'(?im)^(question|answer|evidence(?: \d)?):[ \t]*')

def fields(text, **kw): return [(m.group(1), v.strip()) for m, v in labelled_fields(text, LAB, **kw)]

def test_fields_in_order_each_to_the_next_label():
    assert fields('Question: Why?\nAnswer: Because\nit rains.\nEvidence 1: "It rains."') == [
        ('Question', 'Why?'), ('Answer', 'Because\nit rains.'), ('Evidence 1', '"It rains."')]

def test_text_before_the_marker_is_dropped_only_when_labels_follow_it():
    think = 'Let me think.\nAnswer: maybe\nOutput:::\nQuestion: Q\nAnswer: A'
    assert fields(think) == [('Question', 'Q'), ('Answer', 'A')]
    assert fields(think, marker=None) == [('Answer', 'maybe\nOutput:::'), ('Question', 'Q'), ('Answer', 'A')]
    assert fields('Question: Q\nAnswer: A\nOutput:::\nno labels here') == [('Question', 'Q'), ('Answer', 'A')]

def test_a_second_marker_line_ends_the_value():
    assert fields('Output:::\nQuestion: Q\nAnswer: A\nOutput:::\nQuestion: again')[1] == ('Answer', 'A')

def test_body_label_decides_where_the_fields_start():
    inline = re.compile(r'(?i)\b(question|answer):[ \t]*')
    text = 'Answer: draft\nOutput:::\nQuestion: Q Answer: A'
    assert [m.group(1) for m, _ in labelled_fields(text, inline, body_label=re.compile('Nothing'))] == [
        'Answer', 'Question', 'Answer']
    assert [m.group(1) for m, _ in labelled_fields(text, inline)] == ['Question', 'Answer']

def test_no_label_no_fields(): assert labelled_fields('just prose', LAB) == []

def test_the_three_readers_share_it():
    reply = 'Reasoning. Answer: no\nOutput:::\nFactoid question: Q?\nAnswer: A\nEvidence: "E"\nOutput:::\nAnswer: B'
    assert parse_factoid(reply) == {'question': 'Q?', 'answer': 'A', 'evidence': 'E'}
    typed = 'Output:::\nQuestion: Q?\nAnswer: A\nEvidence 1: one\nEvidence 2: two'
    assert parse_typed(typed, 2) == {'question': 'Q?', 'answer': 'A', 'evidence': ['one', 'two']}
    with pytest.raises(ParseError, match="'Evidence 2:'"): parse_typed('Question: Q\nAnswer: A\nEvidence 1: x', 2)
    with ScriptedServer() as srv:   # a schema-constrained request answered from the scripted text protocol
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache=False, progress=False)
        from ragnb.synth.generate import RATING_SCHEMA
        from ragnb.core.prompts import get_prompt
        p = get_prompt('critique_relevance')
        r = llm.call(p.messages(question='What does the Batch API cost?', audience='developers'), prompt=p.id,
                     schema=RATING_SCHEMA)
    assert r.ok and '"total_rating"' in r.text.replace(' ', ''), r
