"Claim extraction and checking against ragnb's scripted test server (real openai client, no patching)."
import json, re
from pathlib import Path

import pytest

from ragnb.core.llm import LLM, Replies, Retries
from ragnb.core.calls import ParseError
from ragnb.testing.scripted import ScriptedServer
from ragnb.testing.rules import user_text
from ragnb.check.metrics import LABELS, load_results
from ragnb.check.checker import (json_reply, parse_claims, parse_labels, claim_text, CheckTask, pairwise_checker,
                           overlap_judge, llm_checker, run_checks, ragchecker_calls)
from ragnb.testing.rules import scripted_check, read_call
from ragnb.core.samples import sample_path

DATA = sample_path('ragchecker', 'examples')


def make_llm(srv, tmp_path, **kw):
    return LLM(base_url=srv.base_url, api_key='test', model='scripted-test-model', cache_path=tmp_path/'calls.sqlite',
               progress=False, **{'retries': Retries(backoff=0.01), **kw})

def inputs(): return load_results(DATA/'checking_inputs.json')

def assert_complete(r):
    assert len(r.answer2response) == len(r.response_claims) > 0
    assert len(r.response2answer) == len(r.gt_answer_claims) > 0
    k = len(r.retrieved_context)
    for f, claims in (('retrieved2response', r.response_claims), ('retrieved2answer', r.gt_answer_claims)):
        m = getattr(r, f)
        assert len(m) == len(claims) and all(len(row) == k for row in m)
        assert all(l in LABELS for row in m for l in row)
    assert all(l in LABELS for l in r.answer2response + r.response2answer)


def test_parsers():
    assert json_reply('Here:\n```json\n{"claims": [["a", "b", "c"]]}\n```') == {'claims': [['a', 'b', 'c']]}
    with pytest.raises(ParseError): json_reply("__import__('os').getcwd()")
    assert parse_claims('{"claims": [{"subject": "a", "predicate": "b", "object": "c"}]}') == [['a', 'b', 'c']]
    assert parse_claims('{"claims": ["One.", " Two. "]}', 'sentence') == ['One.', 'Two.']
    with pytest.raises(ParseError, match='claim 1'): parse_claims('{"claims": [["a","b","c"], ["a", 3, "c"]]}')
    with pytest.raises(ParseError, match='claim 0 is not a sentence'): parse_claims('{"claims": [[]]}', 'sentence')
    assert parse_labels('{"labels": [{"claim": 1, "label": " NEUTRAL"}, {"claim": 2, "label": "yes"}]}') == {1: 'Neutral'}
    assert parse_labels('{"1": "Entailment", "2": "Contradiction"}') == {1: 'Entailment', 2: 'Contradiction'}
    assert claim_text(['a', 'b', 'c']) == '(a, b, c)'


def test_end_to_end_one_call_per_reference(tmp_path):
    with ScriptedServer() as srv:
        run = run_checks(inputs(), make_llm(srv, tmp_path))
        n_extract, n_check = len(srv.calls('extract_claims_triplet')), len(srv.calls('check_claims'))
        n_repair = len(srv.calls('repair_json'))
    for r in run.results: assert_complete(r)
    assert n_extract == 4
    # one check per reference (answer, response, each chunk) plus any re-asks for dropped claims
    refs = sum(2 + len(r.retrieved_context) for r in run.results)
    assert refs <= n_check + n_repair and n_check + n_repair == run.usage.calls.sum() - n_extract
    for r in run.results:   # calls recorded per result = requests the server saw for that query; at least 2+2+k
        seen = sum(read_call(q['prompt'], q['body']['messages']).turn(0).inputs['question'] == r.query for q in srv.requests)
        assert run.usage.loc[r.query_id, 'calls'] == seen >= 4 + len(r.retrieved_context)
    assert (run.usage.prompt_tokens > 0).all() and (run.usage.failures == 0).all()
    assert list(run.scores.per_result.index) == ['0', '1'] and not run.scores.errors
    # RAGChecker needs 42 calls for query 0 with its 11/22 claims; with the same claims we would need 2+2+4
    assert ragchecker_calls(11, 22, 4) == 42


def test_reask_only_missing_claims(tmp_path):
    def drop_second(call, rng):
        out = json_reply(scripted_check(call, rng))
        if len(out['labels']) > 1: out['labels'] = [x for x in out['labels'] if x['claim'] != 2]
        return json.dumps(out)
    claims = ['The Nile flows into the Mediterranean Sea.', 'The Nile is in Africa.', 'The Amazon is in Asia.']
    with ScriptedServer(rules={'check_claims': drop_second}) as srv:
        o = llm_checker(make_llm(srv, tmp_path))([CheckTask('t', 'q', 'The Nile is in Africa and flows into the Mediterranean Sea.', claims)])[0]
        asks = [read_call(r['prompt'], r['body']['messages']).inputs['claims'] for r in srv.calls('check_claims')]
    assert o.labels == ['Entailment', 'Entailment', 'Neutral'] and o.calls == 2
    second = re.findall(r'(?m)^(\d+)\. ', asks[1])
    assert second == ['2']


def test_malformed_reply_repaired_then_failure_only_for_that_result(tmp_path):
    garbage = lambda call, rng: "I'm sorry, I can't do that."
    def garbage_for_flag(call, rng):   # only the second query (the flag) gets unusable replies
        return garbage(call, rng) if 'flag' in ' '.join(call.turn(0).inputs.values()).lower() else scripted_check(call, rng)
    with ScriptedServer(rules={'check_claims': garbage}) as srv:   # repair turn fixes it
        run = run_checks(inputs(), make_llm(srv, tmp_path))
        assert len(srv.calls('repair_json')) > 0
    for r in run.results: assert_complete(r)
    with ScriptedServer(rules={'check_claims': garbage_for_flag, 'repair_json': garbage}, structured='refuse') as srv:   # unconstrained: replies can be any text
        run = run_checks(inputs(), make_llm(srv, tmp_path/'b'))
    ok, bad = run.results
    assert_complete(ok)
    assert bad.answer2response is None and bad.retrieved2answer is None
    reasons = [f['reason'] for f in bad.ragnb['failures']]
    assert reasons and all('unlabelled' in x for x in reasons) and any('parse' in x for x in reasons)
    assert list(run.scores.per_result.index) == ['0']
    assert [e.result for e in run.scores.errors] == ['1']


def test_malformed_extraction_gets_one_repair_turn(tmp_path):
    with ScriptedServer(rules={'extract_claims_triplet': lambda m, rng: '{"claims": [["half a triplet"]]}'}) as srv:
        run = run_checks(inputs(), make_llm(srv, tmp_path))
        assert len(srv.calls('repair_json')) >= 4
    for r in run.results: assert_complete(r)


def test_none_label_from_a_checker_is_a_failure_for_that_result(tmp_path):
    rs = inputs()
    flag_chunks = {c['text'] for c in rs[1].retrieved_context}
    judge = lambda claim, ref, q: None if ref in flag_chunks else overlap_judge(claim, ref)
    with ScriptedServer() as srv:
        run = run_checks(rs, make_llm(srv, tmp_path), checker=pairwise_checker(judge))
    assert_complete(run.results[0])
    assert run.results[1].retrieved2answer is None and "judge gave None" in run.results[1].ragnb['failures'][0]['reason']
    assert list(run.scores.per_result.index) == ['0']


def test_resume_recomputes_nothing_present(tmp_path):
    out = tmp_path/'out.json'
    with ScriptedServer() as srv:
        llm = make_llm(srv, tmp_path)
        run_checks(inputs(), llm, out=out)
        n = len(srv.requests)
        doc = json.loads(out.read_text())
        run_checks(doc, llm, out=out)
        assert len(srv.requests) == n                       # nothing left to do: no request at all
        doc['results'][1]['retrieved2answer'] = None
        doc['results'][0]['response_claims'] = None; doc['results'][0]['answer2response'] = None
        doc['results'][0]['retrieved2response'] = None
        rs = run_checks(doc, make_llm(srv, tmp_path, cache=False), out=out).results
        new = srv.requests[n:]
    k1 = len(rs[1].retrieved_context)
    prompts = [r['prompt'].split('@')[0] for r in new]
    assert prompts.count('extract_claims_triplet') == 1     # only result 0's response claims
    assert prompts.count('check_claims') >= 1 + len(rs[0].retrieved_context) + k1
    for r in rs: assert_complete(r)
    assert json.loads(out.read_text())['metrics']['overall_metrics']['precision'] is not None


def test_faults_are_retried(tmp_path):
    with ScriptedServer(faults={'429': 0.2, '500': 0.1}, seed=3) as srv:
        run = run_checks(inputs(), make_llm(srv, tmp_path, retries=Retries(backoff=0.01, max_retries=8)))
        assert any(r['fault'] for r in srv.requests)
    for r in run.results: assert_complete(r)


def test_cli_check_end_to_end(tmp_path, monkeypatch, capsys):
    from ragnb.app.cli import main
    out = tmp_path/'checked.json'
    with ScriptedServer() as srv:
        for k, v in {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'test', 'RAGNB_MODEL': 'scripted-test-model',
                     'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
        assert main(['check', str(DATA/'checking_inputs.json'), '--out', str(out), '--claim-format', 'sentence']) == 0
        n = len(srv.requests)
        printed = capsys.readouterr().out
        assert main(['check', str(DATA/'checking_inputs.json'), '--out', str(out)]) == 0   # resumes: nothing to do
        assert len(srv.requests) == n
    assert 'calls' in printed and 'ragchecker_calls' in printed and 'overall_metrics' in printed
    doc = json.loads(out.read_text())
    for r in load_results(doc): assert_complete(r); assert isinstance(r.response_claims[0], str)
    assert set(doc['metrics']) == {'overall_metrics', 'retriever_metrics', 'generator_metrics'}
    assert main(['metrics', str(out)]) == 0


def test_scripted_checker_emits_contradiction_for_negation(tmp_path):
    ref = 'The Nile flows into the Mediterranean Sea. The Amazon is in South America.'
    claims = ['The Nile does not flow into the Mediterranean Sea.', 'The Amazon is in South America.',
              'The Danube crosses Vienna.']
    with ScriptedServer() as srv:
        o = llm_checker(make_llm(srv, tmp_path))([CheckTask('t', 'Where do rivers flow?', ref, claims)])[0]
    assert o.labels == ['Contradiction', 'Entailment', 'Neutral'] and o.calls == 1


def test_empty_response_and_no_chunks_need_no_calls(tmp_path):
    r = inputs()[0].to_dict()
    empty = dict(r, query_id='empty', response='', retrieved_context=[])
    with ScriptedServer() as srv:
        run = run_checks([empty], make_llm(srv, tmp_path))
        prompts = [q['prompt'].split('@')[0] for q in srv.requests]
    e = run.results[0]
    assert e.response_claims == [] and e.answer2response == [] and e.retrieved2response == []
    assert e.retrieved2answer == [[] for _ in e.gt_answer_claims] and len(e.response2answer) == len(e.gt_answer_claims)
    # gt claims, then gt claims against the (empty) response (re-asked only for a label the model left out)
    assert prompts[:2] == ['extract_claims_triplet', 'check_claims'] and set(prompts[2:]) <= {'check_claims', 'repair_json'}
    pr = run.scores.per_result.loc['empty']
    assert pr.precision == 0 and 'precision' in pr.zero_from_empty and 'claim_recall' in pr.zero_from_empty


def test_json_reply_keeps_code_fences_inside_claims():
    from ragnb.check.checker import json_reply, parse_claims
    reply = '```json\n{"claims": ["Run ```pip install openai``` first", "The key goes in OPENAI_API_KEY"]}\n```'
    assert json_reply(reply)['claims'][0] == 'Run ```pip install openai``` first'
    assert parse_claims(reply, 'sentence')[1] == 'The key goes in OPENAI_API_KEY'


def test_one_bad_triplet_drops_only_that_claim_with_a_warning(tmp_path):
    from ragnb.testing.rules import scripted_extract_triplet
    def two_fields_in_third(call, rng):   # the third triplet of every extraction has two fields
        claims = json_reply(scripted_extract_triplet(call, rng))['claims']
        if len(claims) > 3: claims[2] = claims[2][:2]
        return json.dumps({'claims': claims})
    with ScriptedServer(rules={'extract_claims_triplet': two_fields_in_third}) as srv:
        run = run_checks(inputs(), make_llm(srv, tmp_path))
        assert not any(read_call(q['prompt'], q['body']['messages']).turn(0).prompt == 'extract_claims_triplet'
                       for q in srv.calls('repair_json'))  # one bad of many: no repair
    for r in run.results:
        assert_complete(r)
        drops = [w for w in r.ragnb['warnings'] if w['kind'] == 'dropped_claim']
        assert {w['field'] for w in drops} == {'response_claims', 'gt_answer_claims'}
        assert all(w['claim'] == 2 and 'not a [subject, predicate, object] triplet' in w['reason'] for w in drops)
    assert list(run.scores.per_result.index) == ['0', '1'] and not run.scores.errors


def test_zero_claims_from_a_text_is_a_warning_and_left_out_of_the_metrics_it_would_zero(tmp_path, capsys):
    from ragnb.testing.rules import scripted_extract_triplet
    from ragnb.app.cli import main
    rs = inputs()
    resp1 = rs[1].response[:40]
    def rule(call, rng):   # result 1's response yields no claim, even after the repair turn
        first = call.turn(0)   # the extraction (a repair turn re-answers it)
        return '{"claims": []}' if resp1 in first.inputs['text'] else scripted_extract_triplet(first, rng)
    with ScriptedServer(rules={'extract_claims_triplet': rule, 'repair_json': rule}) as srv:
        run = run_checks(rs, make_llm(srv, tmp_path))
        assert sum(resp1 in user_text(q['body']['messages'][:2]) for q in srv.requests if q['prompt'].startswith(('extract', 'repair'))) == 2
    r1 = run.results[1]
    assert r1.response_claims == [] and r1.response.strip()
    assert [w['kind'] for w in r1.ragnb['warnings']] == ['no_claims'] and r1.ragnb['warnings'][0]['field'] == 'response_claims'
    pr = run.scores.per_result
    assert set(pr.loc['1', 'excluded']) == {'precision', 'f1', 'noise_sensitivity_in_relevant', 'noise_sensitivity_in_irrelevant',
                                            'hallucination', 'self_knowledge', 'faithfulness'}
    assert pr.loc['1', ['precision', 'faithfulness']].isna().all() and pr.loc['1', 'recall'] == pr.loc['1', 'recall']  # recall still scored
    o = run.scores.overall
    assert o['overall_metrics']['precision'] == round(pr.loc['0', 'precision'] * 100, 1)   # the mean of result 0 alone, not (p0 + 0) / 2
    assert 'left out' in run.scores._repr_html_() and 'no claim was extracted' in run._repr_html_()
    out = tmp_path/'out.json'
    from ragnb.check.metrics import save_results
    save_results(run.results, out)
    doc = json.loads(out.read_text())   # valid JSON: left-out metrics are null, the reason is kept
    assert doc['results'][1]['metrics']['precision'] is None and doc['results'][1]['ragnb']['excluded_metrics'][0] == 'precision'
    assert main(['metrics', str(out)]) == 0 and json.loads(capsys.readouterr().out)['overall_metrics']['precision'] == o['overall_metrics']['precision']


def test_schema_sent_and_bad_label_entries_salvaged(tmp_path):
    with ScriptedServer() as srv:
        run = run_checks(inputs(), make_llm(srv, tmp_path))
        kinds = {(q['prompt'].split('@')[0], (q['body'].get('response_format') or {}).get('type')) for q in srv.requests}
    assert kinds == {('extract_claims_triplet', 'json_schema'), ('check_claims', 'json_schema')} or \
        kinds <= {('extract_claims_triplet', 'json_schema'), ('check_claims', 'json_schema'), ('repair_json', 'json_schema')}
    for r in run.results: assert_complete(r)


def test_a_reply_cut_off_at_the_token_limit_keeps_its_complete_claims_and_labels(tmp_path):
    "A small model repeating itself until `max_tokens`: the claims and labels written before the cut are kept."
    from ragnb.testing.rules import scripted_extract_triplet
    def looping(call, rng):   # the real claims, then the last one again and again (as Qwen2.5-Coder-1.5B did)
        claims = json_reply(scripted_extract_triplet(call, rng))['claims']
        return json.dumps({'claims': claims + [claims[-1]] * 200})
    def chatty(call, rng):    # every label, then a note that never ends
        return scripted_check(call, rng)[:-1] + ', "note": "' + 'the claim is supported ' * 400
    rules = {'extract_claims_triplet': looping, 'check_claims': chatty}
    with ScriptedServer(rules=rules, structured='refuse') as srv:
        llm = make_llm(srv, tmp_path, replies=Replies(max_tokens=1000), retries=Retries(backoff=0.01, retry_truncated=0))
        run = run_checks(inputs(), llm)
        cut = [q for q in srv.requests if q['prompt'] and q['prompt'].startswith(('extract', 'check'))]
        assert cut and not srv.calls('repair_json')   # every reply was cut off; none was sent back for repair
    for r in run.results:
        assert_complete(r)
        assert len(set(map(tuple, r.response_claims))) == len(r.response_claims)   # the repeats are dropped
        kinds = {(w['field'], w['kind']) for w in r.ragnb['warnings']}
        assert {('response_claims', 'truncated'), ('gt_answer_claims', 'truncated')} <= kinds
        assert not r.ragnb.get('failures')
    assert list(run.scores.per_result.index) == ['0', '1'] and not run.scores.errors
    again = run_checks(inputs(), make_llm(srv, tmp_path, replies=Replies(max_tokens=1000), retries=Retries(backoff=0.01, retry_truncated=0), replay=True))
    assert [r.response_claims for r in again.results] == [r.response_claims for r in run.results]   # cached as cut off


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it
from ragnb.app.cli import main

@pytest.fixture
def scripted_env(server, monkeypatch):
    for k, v in {'OPENAI_BASE_URL': server.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'scripted-test-model'}.items():
        monkeypatch.setenv(k, v)
    return server

def _inputs(path:Path, responses:dict):
    path.write_text(json.dumps({'results': [
        dict(query_id=q, query=f'What about {q}?', gt_answer='The Nile is in Africa.', response=resp,
             retrieved_context=[{'doc_id': 'd1', 'text': 'The Nile is a river in Africa.'}]) for q, resp in responses.items()]}))
    return path

# Issue 40, item 3 (hostile round 3): resume only from an output the input made ----------------------------------------
def test_3_check_resumes_only_from_an_output_made_from_its_input(tmp_path, scripted_env, capsys):
    a = _inputs(tmp_path/'a.json', {'q1': 'The Nile is in Africa.', 'q2': 'It is long.'})
    out = tmp_path/'out.json'
    assert main(['check', str(a), '--out', str(out)]) == 0
    made, n = out.read_bytes(), len(scripted_env.requests)
    assert main(['check', str(a), '--out', str(out)]) == 0               # same input: resumes, nothing to do
    assert len(scripted_env.requests) == n
    capsys.readouterr()
    changed = _inputs(tmp_path/'b.json', {'q1': 'The Nile is in Asia.', 'q2': 'It is long.'})
    other = _inputs(tmp_path/'c.json', {'x1': 'The Nile is in Africa.'})
    for bad, why in ((changed, "result 'q1': its response differs"), (other, "1 result(s) not in it (e.g. 'x1')")):
        assert main(['check', str(bad), '--out', str(out)]) == 1
        err = capsys.readouterr().err
        assert f"{out} was not made from {bad} ({why}" in err and '--restart' in err
        assert out.read_bytes() == made and len(scripted_env.requests) == n   # no call, the old output kept
    assert main(['check', str(changed), '--out', str(out), '--restart']) == 0
    got = json.loads(out.read_text())['results']
    assert got[0]['response'] == 'The Nile is in Asia.' and len(scripted_env.requests) > n

# Issue 40, item 15 (hostile round 3): an input with no results, before any call ---------------------------------------
def test_15_check_on_zero_results_is_a_clear_error(tmp_path, scripted_env, capsys):
    empty = tmp_path/'empty.json'; empty.write_text('{"results": []}')
    assert main(['check', str(empty), '--out', str(tmp_path/'o.json')]) == 1
    assert f'ragnb check: error: {empty}: no results to check' in capsys.readouterr().err
    assert not scripted_env.requests and not (tmp_path/'o.json').exists()
    from ragnb.check.checker import run_checks
    with pytest.raises(ValueError, match='no results to check'): run_checks([])

# Issue 40, item 16 (hostile round 3): an --out name too long for its temporary file, before any call ------------------
def test_16_an_out_name_too_long_for_its_temporary_file_fails_before_any_call(tmp_path, scripted_env, capsys):
    a = _inputs(tmp_path/'a.json', {'q1': 'The Nile is in Africa.'})
    name = 'r' * 245 + '.json'                                            # 250 bytes: legal, its temporary name is not
    (tmp_path/name).write_text('{}'); (tmp_path/name).unlink()            # the name itself is fine here
    assert main(['check', str(a), '--out', str(tmp_path/name)]) == 1
    err = capsys.readouterr().err
    assert 'the file name is 250 bytes' in err and 'at most 241 bytes' in err and not scripted_env.requests
    assert main(['check', str(a), '--out', str(tmp_path/('r' * 236 + '.json'))]) == 0   # 241 bytes: fine
