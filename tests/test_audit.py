"Auditing a judge against reference labels, and the judge profiles, through ragnb's scripted server (real client)."
import json

import pytest

from ragnb.check.checker import small_prompt
from ragnb.core.llm import LLM, Retries
from ragnb.testing.scripted import ScriptedServer
from ragnb.check.metrics import load_results
from ragnb.check.checker import judge_profile, run_checks, small_checker, CheckTask
from ragnb.view.audit import DisagreementViewer
from ragnb.check.audit import audit, metric_moves, cohen_kappa
from ragnb.core.samples import sample_path
SMALL = small_prompt('small')   # the small profile's one-claim prompt

# One result, 8 checks whose labels we know; the scripted judge says Yes exactly for the claims that mention the Nile.
TOY = {'results': [dict(
    query_id='q1', query='Tell me about rivers.', gt_answer='G.', response='R.',
    retrieved_context=[{'doc_id': 'd', 'text': 'C.'}],
    response_claims=['Nile flows north.', 'Paris is big.'], gt_answer_claims=['Nile is long.', 'Rome is old.'],
    answer2response=['Entailment', 'Neutral'], response2answer=['Entailment', 'Contradiction'],
    retrieved2response=[['Entailment'], ['Neutral']], retrieved2answer=[['Neutral'], ['Neutral']])]}


def nile_judge(call, rng):
    claim = call.inputs['claim']
    return 'Yes' if 'Nile' in claim else 'No.'


def make_llm(srv, tmp_path):
    return LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path/'c.sqlite',
               progress=False, retries=Retries(backoff=0.01))


def test_agreement_kappa_confusion_and_metric_moves_by_hand(tmp_path):
    with ScriptedServer(rules={SMALL: nile_judge}) as srv:
        a = audit(TOY, make_llm(srv, tmp_path), profile='small', quiet=True)
        assert len(srv.requests) == 8                      # one call per (claim, reference)
    # reference E N E C E N N N, judge E N E N E N E N (answer2response, response2answer, chunk: response, answer)
    s = a.summary
    assert (s['checks'], s['labelled'], s['accuracy'], s['binary_accuracy']) == (8, 8, 0.75, 0.875)
    assert s['binary_kappa'] == 0.75                       # po .875, pe 3/8*4/8 + 5/8*4/8 = .5
    assert s['kappa'] == pytest.approx((0.75 - 28 / 64) / (1 - 28 / 64), abs=1e-3)
    c = a.confusion
    assert c.loc['Entailment'].tolist() == [3, 0, 0]
    assert c.loc['Neutral'].tolist() == [1, 3, 0]
    assert c.loc['Contradiction'].tolist() == [0, 1, 0]
    assert a.by_field.loc['retrieved2answer', 'accuracy'] == 0.5
    assert a.usage['calls'] == 8 and a.estimated['calls'] == 8
    m = metric_moves(a.reference, a.judged)
    assert m.loc['precision', 'difference'] == 0 and m.loc['claim_recall', 'difference'] == 50.0
    assert m.attrs['mean_abs_difference'] == round(m.difference.abs().mean(), 1)
    d = a.disagreements
    assert sorted(zip(d.field, d.claim)) == [('response2answer', 1), ('retrieved2answer', 0)]
    assert set(d.reply) == {'No.', 'Yes'}                   # the judge's raw replies are kept
    assert '2 disagreements of 8 checks' in DisagreementViewer(a)._repr_mimebundle_()['text/html']


def test_a_second_audit_is_answered_from_the_call_cache(tmp_path):
    with ScriptedServer(rules={SMALL: nile_judge}) as srv:
        audit(TOY, make_llm(srv, tmp_path), profile='small', quiet=True)
        b = audit(TOY, make_llm(srv, tmp_path), profile='small', quiet=True)
        assert len(srv.requests) == 8
    assert b.usage['cached'] == 8 and b.summary['accuracy'] == 0.75


def test_unreadable_replies_are_asked_again_then_a_recorded_failure(tmp_path):
    with ScriptedServer(rules={SMALL: lambda m, rng: 'Perhaps.'}) as srv:
        o = small_checker(make_llm(srv, tmp_path))([CheckTask('t', 'q', 'ref', ['a claim', 'another'])])[0]
        assert len(srv.requests) == 4                      # each claim twice
    assert o.labels is None and 'still unlabelled after 2 call(s)' in o.failure and 'expected Yes or No' in o.failure


def test_default_profile_audit_counts_one_call_per_reference(tmp_path):
    ref = sample_path('ragchecker', 'examples', 'checking_outputs.json')
    with ScriptedServer() as srv:
        a = audit(ref, make_llm(srv, tmp_path), profile='default', quiet=True)
    assert a.summary['checks'] == 217 and a.estimated['calls'] == 2 + 2 + 4 + 3   # answer, response, each chunk
    assert set(a.pairs.judge.dropna()) <= {'Entailment', 'Neutral', 'Contradiction'}


def test_sample_rechecks_only_that_many(tmp_path):
    ref = sample_path('ragchecker', 'examples', 'checking_outputs.json')
    with ScriptedServer() as srv:
        a = audit(ref, make_llm(srv, tmp_path), profile='small', sample=10, seed=3, quiet=True)
        assert len(srv.requests) == 10
    assert a.summary['checks'] == 10 and a.judged == []


def test_judge_profile_auto_reads_the_parameter_count_from_the_name():
    small = ['qwen2.5-coder-1.5b-instruct-q4_k_m', 'Qwen2.5-0.5B-Instruct', 'llama-3.2-3b', 'gemma-2-2b-it']
    big = ['gpt-4o-mini', 'llama-3-70b', 'Mixtral-8x7B', 'qwen2.5-7b', 'qwen', None]
    assert [judge_profile('auto', m) for m in small + big] == ['small'] * 4 + ['default'] * 6
    with pytest.raises(ValueError, match='judge profile'): judge_profile('huge', 'x')


def test_check_with_the_small_profile_labels_every_field(tmp_path):
    with ScriptedServer() as srv:
        run = run_checks(sample_path('ragchecker', 'examples', 'checking_inputs.json'), make_llm(srv, tmp_path),
                         judge_profile='small')
        prompts = {(r['prompt'] or '').split('@')[0] for r in srv.requests}
    assert SMALL in prompts and 'check_claims' not in prompts
    for r in run.results:
        labels = r.answer2response + r.response2answer + [l for row in r.retrieved2answer for l in row]
        assert labels and set(labels) <= {'Entailment', 'Neutral'}   # "No" is Neutral: never Contradiction


def test_cli_audit_prints_the_report_and_writes_its_files(tmp_path, monkeypatch, capsys):
    from ragnb.app.cli import main
    ref = tmp_path/'ref.json'; ref.write_text(json.dumps(TOY))
    with ScriptedServer(rules={SMALL: nile_judge}) as srv:
        for k, v in {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'test', 'RAGNB_MODEL': 'scripted-test-model',
                     'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
        assert main(['audit', str(ref), '--judge-profile', 'small', '--out', str(tmp_path/'a')]) == 0
    cap = capsys.readouterr()
    assert 'about 8 call(s)' in cap.err and 'spent 8 call(s)' in cap.err
    assert '3-way accuracy 75.0%, entailment-vs-not 87.5%' in cap.out and 'claim_recall' in cap.out
    s = json.loads((tmp_path/'a'/'summary.json').read_text())
    assert s['summary']['binary_kappa'] == 0.75 and (tmp_path/'a'/'audit.png').stat().st_size > 1000
    assert len((tmp_path/'a'/'pairs.csv').read_text().splitlines()) == 9


def test_kappa_by_hand():
    assert cohen_kappa('AABB', 'AABA') == pytest.approx(0.5)
    assert cohen_kappa(['x'] * 3, ['x'] * 3) != cohen_kappa(['x'] * 3, ['x'] * 3)   # NaN: chance agreement is total


def test_cli_audit_reports_the_critics_against_the_human_review(tmp_path, monkeypatch, capsys):
    import pandas as pd
    from ragnb.app.cli import main
    from ragnb.synth.generate import Dataset
    # 4 reviewed questions: groundedness keeps all (agrees on 3 of 4), relevance keeps none (agrees on 1 of 4)
    df = pd.DataFrame(dict(question=['a?', 'b?', 'c?', 'd?'], review=['accept', 'edit', 'accept', 'reject'],
                           groundedness_score=[5, 4, 3, 5], relevance_score=[1, 2, 2, 1], standalone_score=[5, 5, 5, 1],
                           kept=[False, False, False, False]))
    Dataset(df).save(tmp_path/'reviewed.jsonl')
    ref = tmp_path/'ref.json'; ref.write_text(json.dumps(TOY))
    with ScriptedServer(rules={SMALL: nile_judge}) as srv:
        for k, v in {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'test', 'RAGNB_MODEL': 'scripted-test-model',
                     'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
        assert main(['audit', str(ref), '--judge-profile', 'small', '--review', str(tmp_path/'reviewed.jsonl')]) == 0
    out = capsys.readouterr().out
    table = out.split('critics against the human review', 1)[1]
    rows = {l.split()[0]: l.split() for l in table.strip().splitlines()[2:]}
    agree = {k: (int(v[1]), float(v[2])) for k, v in rows.items() if k in ('groundedness', 'relevance', 'standalone')}
    assert (agree['groundedness'], agree['relevance'], agree['standalone']) == ((4, .75), (4, .25), (4, 1.0))


def test_a_yes_no_reply_cut_at_the_token_cap_still_gives_its_label(tmp_path):
    chatty = lambda m, rng: 'Yes. The reference says so in its first sentence, which states exactly this fact.'
    with ScriptedServer(rules={SMALL: chatty}) as srv:
        llm = LLM(base_url=srv.base_url, api_key='t', model='scripted-test-model', cache=False, progress=False,
                  retries=Retries(retry_truncated=0))
        o = small_checker(llm)([CheckTask('t', 'q', 'The Nile is long.', ['The Nile is long.'])])[0]
        assert srv.requests[0]['model'] and len(srv.requests) == 1
    assert o.labels == ['Entailment'] and o.replies[0].startswith('Yes.')


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
import os, subprocess, sys
from pathlib import Path
from ragnb.app.cli import main

E, N = 'Entailment', 'Neutral'

from spreadsheet import cells as _cells, formula_free as _formula_free   # tests/spreadsheet.py

# A result whose ids, query and claims start with '=' and '@' (issue 40, items 8, 11 and 17); FORMULA_TOY beside
# this file's own TOY
FORMULA_TOY = {'results': [dict(
    query_id='=q1', query='=1+1', gt_answer='G.', response='R.', retrieved_context=[{'doc_id': 'd', 'text': 'C.'}],
    response_claims=['=Nile flows north.', 'Paris is big.'], gt_answer_claims=['Nile is long.', '@Rome is old.'],
    answer2response=[E, N], response2answer=[E, 'Contradiction'],
    retrieved2response=[[E], [N]], retrieved2answer=[[N], [N]])]}

def _nile(call, rng): return 'Yes' if 'Nile' in call.inputs['claim'] else 'No.'

# Issue 40, items 8 and 17 (hostile round 3): audit files written whole, none with formula cells -----------------------
def test_8_audit_writes_each_file_whole_and_names_the_one_that_failed(tmp_path):
    ref, out = tmp_path/'ref.json', tmp_path/'a'
    ref.write_text(json.dumps(FORMULA_TOY))
    with ScriptedServer(rules={SMALL: _nile}) as srv:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith('OPENAI')}, 'OPENAI_BASE_URL': srv.base_url,
               'OPENAI_API_KEY': 'test', 'RAGNB_MODEL': 'scripted-test-model', 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}
        cmd = [str(Path(sys.executable).with_name('ragnb')), 'audit', str(ref), '--judge-profile', 'small', '--out', str(out)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        _formula_free(out/'pairs.csv')
        # again (every call cached), with the figure's place taken by a folder: its write fails as a full disk would
        (out/'audit.png').unlink(); (out/'audit.png').mkdir(); (out/'audit.png'/'keep').write_text('x')
        (out/'pairs.csv').write_text('old,pairs\n'); (out/'summary.json').write_text('{"old": true}')
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr
    assert f"ragnb audit: error: cannot write {out/'audit.png'}" in r.stderr, r.stderr   # the error names the file
    assert sorted(p.name for p in out.iterdir()) == ['audit.png', 'pairs.csv', 'summary.json']   # no temporary left
    assert len(_cells(out/'pairs.csv')) > 20 and json.loads((out/'summary.json').read_text())['summary']  # whole, new

# Issue 40, item 11 (hostile round 3): malformed label, score and review files -----------------------------------------
@pytest.mark.parametrize('field, value, says', [
    ('review', 'maybe', "row 1 (id 'r1'): field 'review' is 'maybe', not accept, edit or reject"),
    ('groundedness_score', 'five', "reviewed.jsonl, line 2: field 'groundedness_score' is 'five', not a whole number"),
    ('kept', 'False', "row 1 (id 'r1'): field 'kept' is 'False', not true or false"),
])
def test_11_audit_review_files_that_are_malformed_are_named(tmp_path, server, monkeypatch, capsys, field, value, says):
    rows = [dict(id=f'r{i}', question=f'q{i}?', review='accept', groundedness_score=4, kept=True) for i in range(3)]
    rows[1][field] = value
    (tmp_path/'reviewed.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    ref = tmp_path/'ref.json'; ref.write_text(json.dumps(FORMULA_TOY))
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model',
                 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
    assert main(['audit', str(ref), '--judge-profile', 'small', '--review', str(tmp_path/'reviewed.jsonl')]) == 1
    err = capsys.readouterr().err
    assert says in err and 'Traceback' not in err, err
