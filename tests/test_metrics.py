"RAGChecker metrics: the oracle file, invariants, empty cases, bad input, the CLI."
import argparse, json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ragnb.check.metrics import (METRICS, METRIC_GROUPS, METRIC_SPECS, MetricSpec, LabelBatch, CheckingDataError,
                           claim_metrics, score, compare, register_metric, unregister_metric)
from ragnb.app.commands.checking import add_cli
from ragnb.core.samples import sample_path

DATA = sample_path('ragchecker', 'examples')


@pytest.fixture
def outputs(): return json.loads((DATA/'checking_outputs.json').read_text())


def test_oracle_per_query_exact(outputs):
    m = claim_metrics(LabelBatch.from_results(outputs['results']))
    for i, r in enumerate(outputs['results']):
        for k in METRICS:
            assert m[k][i] == r['metrics'][k], (i, k, m[k][i], r['metrics'][k])   # bit-for-bit


def test_oracle_overall_exact(outputs):
    ov = score(outputs['results']).overall
    assert ov['overall_metrics'] == {'precision': 76.4, 'recall': 62.5, 'f1': 68.3}
    for g, ks in ov.items(): assert ks == outputs['metrics'][g.removesuffix('_metrics')]


# An independent, loop-per-result reading of RAGChecker's formulas, to check the vectorised version against.
def naive(a2r, r2a, ret2resp, ret2ans, k):
    E = lambda l: l == 'Entailment'
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.
    p, r = mean([E(l) for l in a2r]), mean([E(l) for l in r2a])
    out = dict(precision=p, recall=r, f1=2 * p * r / (p + r) if p > 0 and r > 0 else 0.)
    recalled = [any(E(l) for l in row) for row in ret2ans]
    relevant = [any(E(row[j]) for row in ret2ans) for j in range(k)]
    ok_ret = bool(r2a) and k > 0
    out['claim_recall'] = mean(recalled) if ok_ret else 0.
    out['context_precision'] = mean(relevant) if ok_ret else 0.
    nrec = sum(recalled)
    out['context_utilization'] = (sum(c and E(l) for c, l in zip(recalled, r2a)) / nrec) if ok_ret and nrec else 0.
    faithful = [any(E(l) for l in row) for row in ret2resp]
    relf = [any(E(row[j]) and relevant[j] for j in range(k)) for row in ret2resp]
    irrf = [any(E(row[j]) and not relevant[j] for j in range(k)) and not rf for row, rf in zip(ret2resp, relf)]
    wrong = [not E(l) for l in a2r]
    ok_noise = bool(a2r) and k > 0 and bool(r2a)
    out['noise_sensitivity_in_relevant'] = mean([a and b for a, b in zip(relf, wrong)]) if ok_noise else 0.
    out['noise_sensitivity_in_irrelevant'] = mean([a and b for a, b in zip(irrf, wrong)]) if ok_noise else 0.
    ok_gen = bool(a2r) and k > 0
    out['hallucination'] = mean([not f and w for f, w in zip(faithful, wrong)]) if ok_gen else 0.
    out['self_knowledge'] = mean([not f and not w for f, w in zip(faithful, wrong)]) if ok_gen else 0.
    out['faithfulness'] = mean(faithful) if ok_gen else 0.
    return out


label = st.sampled_from(['Entailment', 'Neutral', 'Contradiction'])

@st.composite
def result(draw, min_size=0):
    nr, ng, k = (draw(st.integers(min_size, 6)) for _ in range(3))
    return dict(answer2response=draw(st.lists(label, min_size=nr, max_size=nr)),
                response2answer=draw(st.lists(label, min_size=ng, max_size=ng)),
                retrieved2response=[draw(st.lists(label, min_size=k, max_size=k)) for _ in range(nr)],
                retrieved2answer=[draw(st.lists(label, min_size=k, max_size=k)) for _ in range(ng)],
                retrieved_context=[{'doc_id': str(j), 'text': ''} for j in range(k)])


@settings(max_examples=100, deadline=None)
@given(st.lists(result(), min_size=1, max_size=8))
def test_vectorised_matches_naive_including_empty(rs):
    m = claim_metrics(LabelBatch.from_results(rs, strict=True))
    for i, r in enumerate(rs):
        ref = naive(r['answer2response'], r['response2answer'], r['retrieved2response'], r['retrieved2answer'],
                    len(r['retrieved_context']))
        for k in METRICS: assert m[k][i] == pytest.approx(ref[k], abs=1e-12), (k, r)
        for k in METRICS: assert 0 <= m[k][i] <= 1


@settings(max_examples=100, deadline=None)
@given(st.lists(result(min_size=1), min_size=1, max_size=8))
def test_invariants_with_claims_and_chunks(rs):
    pr = score(rs).per_result
    np.testing.assert_allclose(pr.faithfulness + pr.hallucination + pr.self_knowledge, 1)
    np.testing.assert_allclose(pr.precision + pr.noise_sensitivity_in_relevant + pr.noise_sensitivity_in_irrelevant
                               + pr.hallucination, 1)
    assert not pr.zero_from_empty.map(bool).any()


def test_empty_lists_give_ragchecker_zeros_and_are_flagged():
    none = dict(query_id='q', answer2response=[], response2answer=[], retrieved2response=[], retrieved2answer=[],
                retrieved_context=[])
    pr = score([none]).per_result
    assert (pr.loc['q', list(METRICS)] == 0).all()
    assert pr.loc['q', 'zero_from_empty'] == tuple(METRICS)
    # chunks present but entailing nothing: a genuine zero, not flagged
    real = dict(query_id='r', answer2response=['Neutral'], response2answer=['Neutral'],
                retrieved2response=[['Neutral']], retrieved2answer=[['Neutral']], retrieved_context=[{'text': 'x'}])
    pr = score([real]).per_result
    assert pr.loc['r', 'faithfulness'] == 0 and 'faithfulness' not in pr.loc['r', 'zero_from_empty']
    assert pr.loc['r', 'hallucination'] == 1


def test_contradiction_rate():
    r = dict(query_id='c', answer2response=['Contradiction', 'Entailment', 'Neutral', 'Contradiction'],
             response2answer=['Entailment'], retrieved2response=[[]] * 4, retrieved2answer=[[]])
    assert score([r]).per_result.loc['c', 'contradiction_rate'] == 0.5


def test_none_label_and_bad_shapes_fail_only_that_result(outputs):
    good = outputs['results']
    bad = [dict(good[0], query_id='none-label', retrieved2answer=None),
           dict(good[0], query_id='none-inside', response2answer=[None] + good[0]['response2answer'][1:]),
           dict(good[0], query_id='short-row', retrieved2response=[['Neutral']] + good[0]['retrieved2response'][1:]),
           dict(good[0], query_id='rows', retrieved2answer=good[0]['retrieved2answer'][:-1])]
    s = score(bad + good)
    assert list(s.per_result.index) == ['0', '1']
    assert s.overall['overall_metrics'] == {'precision': 76.4, 'recall': 62.5, 'f1': 68.3}
    errs = {e.result: e for e in s.errors}
    assert errs['none-label'].field == 'retrieved2answer'
    assert errs['none-inside'].field == 'response2answer' and 'None' in errs['none-inside'].reason
    assert errs['short-row'].field == 'retrieved2response' and 'row 0' in errs['short-row'].reason
    assert errs['rows'].field == 'retrieved2answer' and '21 rows' in errs['rows'].reason
    with pytest.raises(CheckingDataError, match="result 'none-label', field 'retrieved2answer'"):
        score(bad, strict=True)


def test_dataframe_input_and_compare(outputs):
    import pandas as pd
    a = score(pd.DataFrame(outputs['results']), name='a')
    flipped = [dict(r, answer2response=['Entailment'] * len(r['answer2response'])) for r in outputs['results']]
    b = score(flipped, name='b')
    t = compare([a, b])
    assert list(t.index) == ['a', 'b']
    assert t.loc['a', ('overall', 'precision')] == 76.4 and t.loc['b', ('overall', 'precision')] == 100.0
    assert t.loc['b', ('generator', 'hallucination')] == 0.0


def test_cli_metrics(capsys, tmp_path, outputs):
    ap = argparse.ArgumentParser(); add_cli(ap.add_subparsers())
    args = ap.parse_args(['metrics', str(DATA/'checking_outputs.json')])
    assert args.func(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == set(METRIC_GROUPS) and printed['generator_metrics']['faithfulness'] == 68.2
    f = tmp_path/'half.json'
    f.write_text(json.dumps({'results': [dict(outputs['results'][0], answer2response=None)] + outputs['results'][1:]}))
    args = ap.parse_args(['metrics', str(f)])
    assert args.func(args) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)['overall_metrics']['precision'] == 80.0 and "field 'answer2response'" in err
    (tmp_path/'bad.json').write_text('{"results": 3}')
    assert args.func(ap.parse_args(['metrics', str(tmp_path/'bad.json')])) == 2


# --- RAGChecker files in and out ---
from ragnb.check.metrics import RAGResult, load_results, save_results, results_frame


def test_roundtrip_file_dataframe_objects(outputs, tmp_path):
    rs = load_results(DATA/'checking_outputs.json')
    assert [r.to_dict() for r in rs] == outputs['results']
    assert load_results(results_frame(rs)) == rs
    assert load_results(outputs) == rs == load_results(rs)
    stripped = [dict(r, metrics={}) for r in outputs['results']]
    s = save_results(stripped, tmp_path/'out.json')
    back = json.loads((tmp_path/'out.json').read_text())
    assert [r['metrics'] for r in back['results']] == [r['metrics'] for r in outputs['results']]
    assert back['metrics']['generator_metrics'] == outputs['metrics']['generator']
    assert not (tmp_path/'out.json.tmp').exists() and not s.errors


def test_load_errors_name_result_and_field(outputs, tmp_path):
    r = outputs['results'][1]
    cases = [(dict(r, gt_answer=None), "field 'gt_answer': missing"),
             (dict(r, query=3), "field 'query': expected text"),
             (dict(r, retrieved_context='abc'), "field 'retrieved_context'"),
             (dict(r, retrieved_context=[{'doc_id': 1}]), "field 'retrieved_context': chunk 0 has no 'text'"),
             (dict(r, answer2response='Entailment'), "field 'answer2response'")]
    for bad, msg in cases:
        with pytest.raises(CheckingDataError, match=f"result '1', {msg}"): load_results([outputs['results'][0], bad])
    (tmp_path/'x.json').write_text('{"results": [')
    with pytest.raises(ValueError, match='x.json: not valid JSON'): load_results(tmp_path/'x.json')


def test_half_finished_input_loads_with_nones():
    rs = load_results(DATA/'checking_inputs.json')
    assert all(r.response_claims is None and r.retrieved2answer is None for r in rs)
    s = score(rs)
    assert len(s.per_result) == 0 and {e.field for e in s.errors} == {'answer2response'}


def test_extras_are_saved_under_ragnb_and_summarised(tmp_path):
    empty = dict(query_id='e', query='q', gt_answer='g', response='r', retrieved_context=[], answer2response=[],
                 response2answer=['Entailment'], retrieved2response=[], retrieved2answer=[[]])
    contra = dict(empty, query_id='c', answer2response=['Contradiction', 'Entailment'], retrieved2response=[[], []])
    s = save_results([empty, contra], tmp_path/'o.json')
    back = {r['query_id']: r for r in json.loads((tmp_path/'o.json').read_text())['results']}
    assert back['e']['ragnb']['zero_from_empty'][0] == 'precision' and back['c']['ragnb']['contradiction_rate'] == .5
    assert s.extras == {'contradiction_rate': 25.0, 'results_with_zero_from_empty': 2}
    assert '<br>' in s._repr_html_() and 'extras (not RAGChecker metrics)' in s._repr_html_()


def test_file_errors_name_the_file(outputs, tmp_path):
    f = tmp_path/'in.json'
    f.write_text(json.dumps({'results': [dict(outputs['results'][0], response=None)]}))
    with pytest.raises(CheckingDataError, match=r"in.json: result '0', field 'response': missing"): load_results(f)


@settings(max_examples=60, deadline=None)
@given(st.lists(result(min_size=1), min_size=2, max_size=6), st.data())
def test_a_broken_result_never_changes_the_others(rs, data):
    for i, r in enumerate(rs): r['query_id'] = str(i)
    bad = data.draw(st.sets(st.integers(0, len(rs) - 1), max_size=len(rs) - 1))
    fields = ['answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer']
    broken = []
    for i, r in enumerate(rs):
        if i in bad:
            f = data.draw(st.sampled_from(fields))
            r = dict(r, **{f: None if data.draw(st.booleans()) else ([None] + r[f][1:] if f in fields[:2] else r[f][:-1])})
        broken.append(r)
    s, clean = score(broken), score([r for i, r in enumerate(rs) if i not in bad])
    assert sorted(e.result for e in s.errors) == sorted(str(i) for i in bad)
    assert s.per_result[list(METRICS)].equals(clean.per_result[list(METRICS)])


def test_a_results_file_of_20000_results_is_not_refused(tmp_path):
    "RAGChecker's output for 20,000 results with their passages (150 MB) is read; a file over the limit is refused."
    from ragnb.core.safe import RESULTS_LIMIT, read_json
    from ragnb.core.safe import UnsafeInput
    example = (DATA/'checking_outputs.json').read_bytes()
    assert RESULTS_LIMIT > 20_000 * len(example) / 2 * 1.2   # the example holds 2 results; 20% to spare
    p = tmp_path/'results.json'; p.write_bytes(example)
    assert read_json(p) == json.loads(example)
    with pytest.raises(UnsafeInput, match=r'results.json: [\d,]+ bytes, over the 1,000-byte limit'):
        read_json(p, limit=1000)


def test_a_metric_registered_in_one_place_shows_everywhere(outputs):
    "One `register_metric` row: scored, in the overall table, the comparison, the figure and the metrics viewer."
    from ragnb.rag.systems import compare as compare_systems
    from ragnb.view.widgets import metric_sets, result_html
    from ragnb.view.plots import plot_metrics
    register_metric(MetricSpec('toy_unsupported', 'generator_metrics', 'Toy', 'toy: response claims no chunk entails',
                               lambda c, m: c.mean_r(~c.faithful), ('response', 'chunks'),
                               counts=('response', ('unfaithful',), ()), lower_is_better=True))
    try:
        s = score(outputs['results'])
        pr = s.per_result
        assert np.allclose(pr.toy_unsupported, 1 - pr.faithfulness)                    # the metrics table
        assert 'toy_unsupported' in s.overall['generator_metrics'] and len(METRICS) == 12
        cmp = compare_systems(outputs['results'], outputs['results'], names=['a', 'b'], n_resamples=20)
        assert 'Toy' in cmp.table().columns.get_level_values(1) and 'Toy' in cmp.delta_table().columns
        assert 'lower is better for NS(I), NS(II), Hallu., Toy' in str(cmp)              # the comparison
        r = outputs['results'][0]
        num, den = metric_sets(r)['toy_unsupported']
        assert len(num) == round(pr.toy_unsupported.iloc[0] * len(den))                  # the claims it counts
        assert 'toy: response claims no chunk entails' in result_html(r, pr.iloc[0].to_dict())  # the viewer
        assert 'toy unsupported' in ' '.join(t.get_text() for t in plot_metrics(s).axes[0].get_yticklabels())
        empty = dict(query_id='e', answer2response=['Entailment'], response2answer=[], retrieved2response=[[]],
                     retrieved2answer=[], retrieved_context=[], response_claims=[['x']], gt_answer_claims=[])
        assert 'toy_unsupported' in score([empty]).per_result.loc['e', 'zero_from_empty']
        with pytest.raises(ValueError, match='exists already'): register_metric(METRIC_SPECS['toy_unsupported'])
    finally: unregister_metric('toy_unsupported')
    assert len(METRICS) == 11 and 'toy_unsupported' not in score(outputs['results']).per_result
    with pytest.raises(KeyError, match='no metric'): unregister_metric('toy_unsupported')
