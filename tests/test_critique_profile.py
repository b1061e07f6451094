"""The critics' small profile: one Yes/No question per criterion, the fixed words first, read strictly; chosen by the
model's name (`auto`), through the real client against ragnb's scripted server."""
import json

import pytest

from ragnb.app.cli import main
from ragnb.app.demo import sample_docs
from ragnb.core.llm import LLM
from ragnb.core.prompts import get_prompt
from ragnb.synth.generate import QA, critic_profile, critique, generate_dataset
from ragnb.testing.scripted import ScriptedServer

PASSAGE = ("The Realtime API streams audio over WebSockets. Sessions last at most 30 minutes. The default voice is "
           "alloy; eight other voices can be chosen when the session starts.")


def _qa(i, question, answer):
    return QA(f'c/q{i}', 'doc.md', 'doc.md', 'c', 0, PASSAGE, question=question, answer=answer, evidence=PASSAGE)


def test_auto_picks_small_for_small_models_in_billions_or_millions():
    for m in ('qwen2.5-coder-1.5b-instruct-q4_k_m', 'Llama-3.2-3B-Instruct', 'gemma-3-270m-it', 'SmolLM2-360M'):
        assert critic_profile('auto', m) == 'small', m
    for m in ('gpt-4o-mini', 'Qwen2.5-7B-Instruct', None):
        assert critic_profile('auto', m) == 'default', m
    assert critic_profile('default', 'gemma-3-270m-it') == 'default'
    with pytest.raises(ValueError, match="one of \\('default', 'small', 'auto'\\)"): critic_profile('tiny', None)


def test_small_critics_ask_yes_no_with_the_passage_first_and_read_strictly(tmp_path):
    seen = []
    def grounded(call, rng):
        seen.append(call.messages)
        return 'Yes' if '30 minutes' in call.inputs['answer'] else 'No, the passage never says so.'
    rules = {'critique_grounded_yes_no': grounded,
             'critique_relevant_yes_no': lambda call, rng: 'Maybe',   # neither Yes nor No: a recorded failure
             'critique_standalone_yes_no': lambda call, rng: 'yes.'}
    qas = [_qa(1, 'How long can a Realtime API session last?', 'At most 30 minutes.'),
           _qa(2, 'What sample rate does the Realtime API use?', '24 kHz.')]
    with ScriptedServer(rules=rules) as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='qwen2.5-1.5b-instruct', progress=False,
                  cache_path=tmp_path/'calls.sqlite')
        critique(qas, llm, 'AI developers', profile='auto')   # the model's name says 1.5B: small
    assert [(q.groundedness_score, q.standalone_score, q.relevance_score) for q in qas] == [(5, 5, None), (1, 5, None)]
    assert qas[1].groundedness_eval.startswith('No: the passage does not state this answer')
    assert all(f['stage'] == 'critique_relevance' and f['kind'] == 'parse' and 'Maybe' in f['message']
               for q in qas for f in q.failures) and all(len(q.failures) == 1 for q in qas)
    assert qas[0].critique_prompts.split(',')[0] == 'critique_grounded_yes_no@1'
    # every fixed word before the passage, the passage before the question and its answer, which come last
    a, b = (m[-1]['content'] for m in seen)
    fixed = get_prompt('critique_grounded_yes_no').template.split('{context}')[0]
    assert a.startswith(fixed) and b.startswith(fixed + PASSAGE)
    assert a.index(PASSAGE) < a.index('How long can') and a.rstrip().endswith('Does the passage state this answer to '
                                                                               'the question?')


def test_generate_keeps_what_the_small_critics_pass(tmp_path):
    with ScriptedServer() as srv:
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', progress=False,
                  cache_path=tmp_path/'calls.sqlite')
        ds = generate_dataset(sample_docs(), llm, max_chunks=4, critique_profile='small', check_language=False)
    df = ds.df
    assert ds.stats['critique_profile'] == 'small'
    assert set(df.groundedness_score.dropna()) <= {1, 5} and set(df.standalone_score.dropna()) <= {1, 5}
    bad = df[df.question == 'What is this passage about?']   # the scripted generator's unanswerable question
    assert len(bad) == 1 and not bad.kept.iloc[0] and 'standalone 1 < 3' in bad.drop_reason.iloc[0]
    assert df.kept.sum() >= 2


def test_the_cli_says_which_critique_profile_and_why(tmp_path, monkeypatch, capsys):
    with ScriptedServer() as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        guide = sample_docs()/'what_makes_documentation_good.md'
        assert main(['generate', str(guide), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2',
                     '--model', 'scripted-test-model', '--critique-profile', 'small', '--keep-all']) == 0
    err = capsys.readouterr().err
    assert 'ragnb generate: critique profile small (asked for)' in err, err
    rows = [json.loads(l) for l in (tmp_path/'qa.jsonl').read_text().splitlines()]
    assert rows and all(r['critique_prompts'].startswith('critique_grounded_yes_no@1') for r in rows if r['question'])
