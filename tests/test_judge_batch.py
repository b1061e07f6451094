"""Issue 41, offline steps: the small judge asks several claims of one reference per call (opt-in, --claims-per-call),
prints what a run will send before it starts (--dry-run sends nothing); through the real client and the scripted server."""
import json
import pytest
from ragnb.app.cli import main
from ragnb.check.checker import ParseError, yes_no_lines, estimate_run, SMALL_BATCH
from ragnb.check.metrics import load_results
from ragnb.core.samples import sample_path

EXAMPLE = sample_path('ragchecker', 'examples', 'checking_inputs.json')

@pytest.fixture
def env(server, monkeypatch, tmp_path):
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
    return server

def _checks(srv): return [r for r in srv.requests if (r['prompt'] or '').split('@')[0].startswith('judge_claim')]

def test_several_claims_per_call_give_the_labels_one_per_call_gives(tmp_path, env, monkeypatch):
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'one.json'), '--judge-profile', 'small']) == 0
    one_calls = len(_checks(env)); env.requests.clear()
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache8'))   # a fresh cache: every checking call is sent
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'eight.json'), '--judge-profile', 'small',
                 '--claims-per-call', str(SMALL_BATCH)]) == 0
    eight_calls = len(_checks(env))
    assert eight_calls * 3 < one_calls, (eight_calls, one_calls)   # far fewer calls
    a, b = load_results(tmp_path/'one.json'), load_results(tmp_path/'eight.json')
    for x, y in zip(a, b):   # the scripted judge labels each claim the same way, alone or in a list
        for f in ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer'):
            assert getattr(x, f) == getattr(y, f), (x.query_id, f)

def test_dry_run_says_what_it_would_send_and_sends_nothing(tmp_path, env, capsys):
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'o.json'), '--judge-profile', 'small', '--dry-run']) == 0
    err = capsys.readouterr().err
    assert 'would send about' in err and 'model calls' in err and 'judge profile small' in err
    assert not env.requests and not (tmp_path/'o.json').exists()
    e1 = estimate_run(load_results(EXAMPLE), 'small')
    e8 = estimate_run(load_results(EXAMPLE), 'small', claims_per_call=SMALL_BATCH)
    assert e8['check_calls'] * 3 < e1['check_calls'] and e1['extract_calls'] == e8['extract_calls'] > 0

@pytest.mark.parametrize('reply, n, want', [
    ('1. Yes\n2. No\n3. Yes', 3, {1: 'Entailment', 2: 'Neutral', 3: 'Entailment'}),
    ('Claim 1: yes\nclaim 2) NO.', 2, {1: 'Entailment', 2: 'Neutral'}),
    ('1. Yes\n3. No', 3, {1: 'Entailment', 3: 'Neutral'}),                    # a missing line: claim 2 left out
    ('1. Yes\n2. Perhaps', 2, {1: 'Entailment', 2: None}),                    # a line that is neither: no label
    ('1. Yes\n1. No\n2. Yes', 2, {1: None, 2: 'Entailment'}),                 # two lines that disagree: neither
    ('1. Yes\n2. N', 2, {1: 'Entailment', 2: None}),                          # cut at the cap: complete lines kept
])
def test_numbered_labels_are_read_strictly(reply, n, want):
    assert yes_no_lines(reply, n) == want

@pytest.mark.parametrize('reply', ['1. Yes\n4. No', 'The first claim is supported.', ''])
def test_a_label_for_a_claim_not_asked_or_prose_is_a_parse_error(reply):
    with pytest.raises(ParseError): yes_no_lines(reply, 3)

@pytest.mark.parametrize('model, profile, prompt', [('qwen2.5-coder-1.5b-instruct-q4_k_m', 'small', 'judge_claim_last'),
                                                    ('scripted-test-model', 'default', 'check_claims')])
def test_auto_is_the_default_and_says_why(tmp_path, env, monkeypatch, capsys, model, profile, prompt):
    monkeypatch.setenv('RAGNB_MODEL', model)
    assert main(['check', str(EXAMPLE), '--out', str(tmp_path/'o.json')]) == 0
    err = capsys.readouterr().err
    assert f"ragnb check: judge profile {profile} (auto: the model name '{model}'" in err
    asked = {(r['prompt'] or '').split('@')[0] for r in env.requests}
    assert prompt in asked and ({'judge_claim_binary', 'check_claims'} - {prompt}).isdisjoint(asked)
