"`ragnb demo`: the README's command replays the shipped recording offline; its files agree with each other; reruns reuse the calls file."
import json, math, os, subprocess, sys
from pathlib import Path
import pytest
from ragnb.app.demo import (DEFAULTS, DemoModel, SCRIPTED_MODEL, export_calls, load_recording, read_recording, recording_path,
                        replay_problem, run_demo)
from ragnb.core.llm import LLM
from ragnb.core.cache import CallCache
from ragnb.check.metrics import score, load_results
from ragnb.testing.scripted import ScriptedServer

FIGURES = ('critique_scores', 'retrieval_by_k', 'ragchecker_metrics', 'claim_shares', 'entailment_map', 'testset_coverage')

@pytest.fixture(scope='module')
def replayed(tmp_path_factory):
    "`ragnb demo --out OUT` run as a user runs it: no endpoint, no key, no local model, so the recording is replayed."
    out, cache = tmp_path_factory.mktemp('demo')/'demo-out', tmp_path_factory.mktemp('cache')
    env = {k: v for k, v in os.environ.items() if k not in ('OPENAI_API_KEY', 'OPENAI_BASE_URL', 'AZURE_OPENAI_ENDPOINT',
                                                           'RAGNB_MODEL', 'RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON', 'RAGNB_LIVE')}
    env['RAGNB_CACHE_DIR'] = str(cache)
    r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'demo', '--out', str(out)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return out, r.stdout + r.stderr

def test_replay_names_the_recorded_model(replayed):
    out, log = replayed
    meta, rows = read_recording(recording_path())
    s = json.loads((out/'summary.json').read_text())
    assert s['run']['mode'] == 'replayed' and s['run']['model'] == meta['model'] and s['run']['recorded']['mode'] == 'local'
    assert 'replayed' in log and meta['model'] in log
    u = s['usage']
    assert (u['calls'], u['failed']) == (0, 0)  # nothing reached a model, nothing was missing from the recording
    assert u['cached'] > 0   # every call the run made came from the recording (a request asked twice is two hits)
    for name in ('rag_results.json', 'ragchecker_output.json'):
        assert json.loads((out/name).read_text())['ragnb_run']['mode'] == 'replayed'
    for f in s['figures'].values(): assert meta['model'] in f['caption'] and 'replayed' in f['caption']

def test_files_and_numbers_agree(replayed):
    out, _ = replayed
    s = json.loads((out/'summary.json').read_text())
    rows = [json.loads(l) for l in (out/'dataset.jsonl').read_text().splitlines()]
    assert len(rows) == s['dataset']['chunks'] == DEFAULTS['max_chunks']  # one question per sampled passage
    assert sum(r['question'] is not None for r in rows) == s['dataset']['questions']
    kept = [r for r in rows if r['kept']]
    assert len(kept) == s['dataset']['kept'] > 0
    assert {r['model_run'] for r in rows} == {'replayed'} and {r['generator_model'] for r in rows} == {s['run']['model']}
    for r in kept: assert min(r[c] for c in ('groundedness_score', 'relevance_score', 'standalone_score')) >= s['keep']
    ret = s['retrieval']
    assert 0 < ret['n'] <= len(kept) and len(ret['by_k']) == 16
    assert ret['n'] + len(ret['left_out']) == len(kept)   # every kept question scored or said why not
    assert {q['query_id'] for q in ret['left_out']} == {r['id'] for r in kept if not r['evidence_found']}
    for row in ret['by_k']: assert row['low'] - 1e-9 <= row['mean'] <= row['high'] + 1e-9 and row['n'] == ret['n']
    rag = json.loads((out/'rag_results.json').read_text())['results']
    assert len(rag) == len(kept) - s['failures']['rag_answers']
    assert {r['query'] for r in rag} <= {r['question'] for r in kept}
    assert all(len(r['retrieved_context']) == DEFAULTS['k'] for r in rag)
    checked = json.loads((out/'ragchecker_output.json').read_text())
    assert checked['metrics'] == s['ragchecker']
    assert score(load_results(checked)).overall == s['ragchecker']  # the overall metrics follow from the file's labels
    assert len(checked['results']) == len(rag) and s['ragchecker_n'] <= len(rag)
    assert s['response_claims'] == sum(len(r.get('response_claims') or []) for r in checked['results'])
    if s['claim_shares']: assert math.isclose(sum(s['claim_shares'].values()), 1, abs_tol=0.02)
    assert sum(st['cached'] for st in s['stages']) == s['usage']['cached']

def test_figures_and_report(replayed):
    out, _ = replayed
    s = json.loads((out/'summary.json').read_text())
    assert set(s['figures']) | set(s['missing_figures']) == set(FIGURES) and 'retrieval_by_k' in s['figures']
    for f in s['figures'].values():
        p = Path(f['file'])
        assert p.parent == out and p.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and p.stat().st_size > 5000
    html = (out/'report.html').read_text()
    assert 'REPLAYED' in html and s['run']['model'] in html and s['run']['recorded']['recorded'] in html
    for name in s['figures']: assert f"src='{name}.png'" in html
    assert f"n = {s['retrieval']['n']} kept questions" in html and '95% percentile-bootstrap interval' in html
    for q in s['retrieval']['left_out']: assert f"{q['query_id']}: {q['reason']}" in html
    import html as h
    q = json.loads((out/'dataset.jsonl').read_text().splitlines()[0])['question']
    assert h.escape(q) in html  # the model's text, escaped
    for m in ('precision', 'claim_recall', 'context_precision', 'noise_sensitivity_in_irrelevant', 'faithfulness'): assert m in html

def test_replay_refuses_other_settings(tmp_path):
    assert 'k=5 (recorded 3)' in replay_problem({**DEFAULTS, 'src': None, 'k': 5})
    with pytest.raises(ValueError, match='k=5'): run_demo(tmp_path/'o', k=5, mode='replayed', log=lambda s: None)

def test_recording_round_trip(tmp_path):
    c = CallCache(tmp_path/'a.sqlite')
    c.put('k1', {'text': 'one', 'model': 'm', 'usage': {'prompt_tokens': 3, 'completion_tokens': 1}}, 'chat', 'm', 'p@1')
    c.put('e1', {'embedding': [0.1]}, 'embedding', 'e')
    p = export_calls(c, tmp_path/'rec.jsonl', {'model': 'm'})
    meta, rows = read_recording(p)
    assert meta == {'model': 'm'} and [r['key'] for r in rows] == ['k1']  # chat calls only
    c2 = CallCache(tmp_path/'b.sqlite')
    assert load_recording(p, c2) == meta and c2.get('k1') == c.get('k1')
    (tmp_path/'bad.jsonl').write_text('{"meta": {}}\n{"key": "x"}\n')
    with pytest.raises(ValueError, match='line 2'): load_recording(tmp_path/'bad.jsonl', c2)

def test_scripted_run_is_labelled_and_rerun_reuses_its_calls(tmp_path):
    out = tmp_path/'s'
    first = run_demo(out, max_chunks=6, k=5, log=lambda s: None)  # settings the recording does not cover: scripted
    assert first['run']['mode'] == 'scripted' and first['usage']['calls'] > 0
    for name in ('rag_results.json', 'ragchecker_output.json'): assert json.loads((out/name).read_text())['ragnb_run']['mode'] == 'scripted'
    assert all('scripted' in f['caption'] for f in first['figures'].values())
    assert 'SCRIPTED' in (out/'report.html').read_text()
    again = run_demo(out, max_chunks=6, k=5, log=lambda s: None)  # a new server on a new port; the calls file answers
    assert again['usage']['calls'] == 0   # every request the first run made, asked again, is a hit (a repeat is one too)
    assert again['usage']['cached'] == first['usage']['calls'] + first['usage']['cached'], (first['usage'], again['usage'])
    assert again['ragchecker'] == first['ragchecker']

def test_report_escapes_model_text(tmp_path):
    "A question with markup in it is shown as text in the report, never as markup."
    from ragnb.testing.rules import scripted_factoid
    evil = '<img src=x onerror=alert(1)>'
    five = lambda call, rng: 'Evaluation: clear and useful.\nTotal rating: 5'
    rules = {'factoid_qa': lambda call, rng: scripted_factoid(call, rng).replace('Factoid question: ', f'Factoid question: {evil} ', 1),
             'critique_groundedness': five, 'critique_relevance': five, 'critique_standalone': five}
    with ScriptedServer(rules=rules) as srv:
        llm = LLM(base_url=srv.base_url, api_key='x', model=SCRIPTED_MODEL, cache_path=tmp_path/'c.sqlite', progress=False)
        s = run_demo(tmp_path/'o', max_chunks=2, model=DemoModel(llm, 'scripted', 'test'), log=lambda s: None)
    assert s['dataset']['kept'] >= 1 and evil in (tmp_path/'o'/'dataset.jsonl').read_text()  # the data keeps the text as written
    html = (tmp_path/'o'/'report.html').read_text()
    assert evil not in html and 'onerror' in html and '&lt;img src=x onerror=alert(1)&gt;' in html

def test_auto_mode_order(tmp_path, monkeypatch):
    "An endpoint first, then the local model, then the recording for its own settings, then the scripted server."
    from ragnb.app.demo import choose_mode
    quiet = lambda s: None
    for v in ('RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON', 'AZURE_OPENAI_ENDPOINT'): monkeypatch.delenv(v, raising=False)
    said = []
    assert choose_mode(log=said.append) == 'replayed' and 'ragnb local install' in said[0]  # the one-line instruction
    assert choose_mode(params={**DEFAULTS, 'src': ['my-docs']}, log=quiet) == 'scripted'
    py = tmp_path/'py'; py.write_text('#!/bin/sh\nexit 0\n'); py.chmod(0o755)  # an interpreter that has llama-cpp
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    monkeypatch.setenv('RAGNB_LOCAL_PYTHON', str(py)); monkeypatch.setenv('RAGNB_GGUF', str(tmp_path/'m.gguf'))
    assert choose_mode(log=quiet) == 'local'
    monkeypatch.setenv('OPENAI_BASE_URL', 'http://127.0.0.1:9/v1')
    assert choose_mode(log=quiet) == 'live'
    assert choose_mode('scripted', log=quiet) == 'scripted'

def test_live_run_names_its_endpoint_and_never_writes_the_key(tmp_path, monkeypatch):
    key = 'sk-test-secret-0123456789'
    with ScriptedServer() as srv:  # an OpenAI-compatible endpoint named by the environment, as a user sets one
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', key)
        monkeypatch.setenv('RAGNB_MODEL', SCRIPTED_MODEL)
        s = run_demo(tmp_path/'o', max_chunks=4, log=lambda s: None)
    assert s['run']['mode'] == 'live' and s['run']['endpoint'] == srv.base_url and s['usage']['calls'] > 0
    for f in (tmp_path/'o').iterdir(): assert key.encode() not in f.read_bytes(), f.name
