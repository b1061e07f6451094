"""Issue 41: the small profile's second version (small@2, prompt judge_claim_last) puts the claim last, so consecutive
claims of one reference share the whole prompt before it; selectable beside small@1, which every lesson replays.
Through the real client and the scripted server."""
import os
import pytest
from ragnb.app.cli import main
from ragnb.check.checker import (CheckTask, SMALL_PROMPTS, SMALL_VERSION, estimate_run, judge_profile, profile_checker,
                                 small_prompt)
from ragnb.check.metrics import load_results
from ragnb.core.llm import LLM
from ragnb.core.prompts import get_prompt
from ragnb.core.samples import sample_path

EXAMPLE = sample_path('ragchecker', 'examples', 'checking_inputs.json')
FIELDS = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')

@pytest.fixture
def env(server, monkeypatch, tmp_path):
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
    return server

def _text(msgs): return ''.join(m['role'] + '\n' + m['content'] + '\n' for m in msgs)

def test_small_at_2_labels_as_small_at_1_with_the_claim_last(tmp_path, env, monkeypatch):
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'v1.json'), '--judge-profile', 'small@1']) == 0
    v1 = [r for r in env.requests if (r['prompt'] or '').startswith('judge_claim')]
    assert v1 and {r['prompt'] for r in v1} == {'judge_claim_binary@1'}
    env.requests.clear()
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache2'))   # a fresh cache: every call is sent again
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'v2.json'), '--judge-profile', 'small@2']) == 0
    v2 = [r for r in env.requests if (r['prompt'] or '').startswith('judge_claim')]
    assert {r['prompt'] for r in v2} == {'judge_claim_last@1'} and len(v2) == len(v1)
    for x, y in zip(load_results(tmp_path/'v1.json'), load_results(tmp_path/'v2.json')):
        for f in FIELDS: assert getattr(x, f) == getattr(y, f), (x.query_id, f)   # the scripted judge: same labels
    # what the server saw: each call ends with its claim, and a call after one about the same reference repeats all
    # of that call up to its claim
    texts = [_text(r['body']['messages']) for r in v2]
    claims = [get_prompt('judge_claim_last').inputs(r['body']['messages'])['claim'] for r in v2]
    assert all(t.rstrip('\n').endswith('Claim: ' + c) for t, c in zip(texts, claims))
    same_ref = [(a, b, cb) for a, b, cb in zip(texts, texts[1:], claims[1:])
                if a.rsplit('Claim: ', 1)[0] == b.rsplit('Claim: ', 1)[0]]
    assert len(same_ref) > len(v2) // 2
    assert all(len(os.path.commonprefix([a, b])) >= len(b) - len('Claim: ' + cb) - 2 for a, b, cb in same_ref)

def test_the_estimate_counts_the_longer_shared_start():
    rs = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))   # its claims, labels removed
    for r in rs:
        for f in FIELDS: setattr(r, f, None)
    e1, e2 = estimate_run(rs, 'small@1'), estimate_run(rs, 'small@2')
    assert e1['check_calls'] == e2['check_calls'] == 217
    new = lambda e: e['prompt_tokens'] - e['repeated']   # what a prefix cache cannot read: evaluated again
    assert new(e2) * 3 < new(e1), (new(e1), new(e2))     # claim and instruction each call, against the claim alone
    assert estimate_run(rs, 'small') == estimate_run(rs, f'small@{SMALL_VERSION}')

def test_profiles_name_their_prompt_and_bad_names_stop_before_any_call(tmp_path, env, capsys):
    assert [small_prompt(judge_profile(p, None)) for p in ('small@1', 'small@2')] == [SMALL_PROMPTS['1'],
                                                                                      SMALL_PROMPTS['2']]
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'o.json'), '--judge-profile', 'small@2',
                 '--dry-run']) == 0
    assert 'judge profile small@2 (asked for)' in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(['check', str(EXAMPLE), '--out', str(tmp_path/'o.json'), '--judge-profile', 'small@9'])
    assert e.value.code == 2 and 'small@9' in capsys.readouterr().err and not env.requests

def test_profile_checker_small_at_2_reads_yes_and_no(env):
    llm = LLM(base_url=env.base_url, api_key='sk-test', model='scripted-test-model', cache_path=None)
    t = CheckTask('t', 'Where does the Nile flow?', 'The Nile flows into the Mediterranean Sea.',
                  ['The Nile flows into the Mediterranean Sea.', 'Paris is the capital of France.'])
    [o] = profile_checker(llm, 'small@2')([t])
    assert o.labels == ['Entailment', 'Neutral'] and o.failure is None
    assert {r['prompt'] for r in env.requests} == {'judge_claim_last@1'}
