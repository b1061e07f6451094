"Issue 33: metrics corrected by a person's labels (labels file, PPI++ and calibrated estimates, planner, CLI)."
import copy, json
from pathlib import Path

import numpy as np
import pytest

from ragnb.check.corrected import (LabelsError, Labels, add_labels, read_labels, label_plan, next_claims,
                                   reference_labels, corrected_metrics, ppi_mean, dataset_fingerprint, PPI_METRICS,
                                   labels_path)
from ragnb.check.metrics import load_results, score, METRICS
from ragnb.core.samples import sample_path

FIELDS = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')


@pytest.fixture(scope='module')
def truth(): return load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))


def biased(results, seed=1, up=1/3, down=1/10):
    "A judge that says Entailment too readily (seeded flips of the truth)."
    rng, out = np.random.default_rng(seed), copy.deepcopy(results)
    flip = lambda v: ('Neutral' if rng.random() < down else v) if v == 'Entailment' else (
        'Entailment' if rng.random() < up else v)
    for r in out:
        for f in FIELDS:
            setattr(r, f, [[flip(x) for x in row] if isinstance(row, list) else flip(row) for row in getattr(r, f)])
    return out


@pytest.fixture(scope='module')
def judged(truth): return biased(truth)


def row(**kw): return dict(dict(result='0', side='response', claim=0, ref='answer', label='Entailment'), **kw)


@pytest.mark.parametrize('bad, says', [
    (row(label='Yes'), "unknown label 'Yes'"),
    (row(result='nope'), "result 'nope' is not in the dataset"),
    (row(claim=99), "has no response claim 99"),
    (row(side='query'), "side 'query'"),
    (row(ref='response'), "not 'response'"),
    (row(ref=7), "not 7"),
    (row(ref=True), "not True"),
    ({k: v for k, v in row().items() if k != 'label'}, "field 'label' is missing"),
    (row(claim_text='something else'), "the claim's text differs"),
])
def test_bad_rows_are_refused_with_the_line_and_nothing_is_written(tmp_path, truth, bad, says):
    p = tmp_path/'r.labels.jsonl'
    add_labels(p, truth, [row(claim=1)])
    before = p.read_bytes()
    with pytest.raises(LabelsError, match='new label 1') as e: add_labels(p, truth, [row(claim=2), bad])
    assert says in str(e.value)
    assert p.read_bytes() == before                    # the good row before the bad one is not written either
    # the same row written into the file by hand: named by its line
    p.write_text(before.decode() + json.dumps(bad) + '\n')
    with pytest.raises(LabelsError, match=r'line 3: ') as e: read_labels(p, truth)
    assert says in str(e.value)


def test_duplicates_other_datasets_and_broken_files(tmp_path, truth):
    p = tmp_path/'r.labels.jsonl'
    add_labels(p, truth, [row(), row(ref=0)])
    with pytest.raises(LabelsError, match='never overwritten'): add_labels(p, truth, [row(label='Neutral')])
    lines = p.read_text().splitlines()
    p.write_text('\n'.join(lines + [lines[2]]) + '\n')
    with pytest.raises(LabelsError, match=r'line 4: the same decision as line 3'): read_labels(p, truth)
    p.write_text('\n'.join(lines) + '\n')
    other = copy.deepcopy(truth); other[0].response_claims[0] = ['x', 'y', 'z']
    with pytest.raises(LabelsError, match=r'line 1: these labels are of another dataset'): read_labels(p, other)
    p.write_text('\n'.join(lines[:2] + ['{"result": '] + lines[2:]) + '\n')
    with pytest.raises(LabelsError, match=r'line 3: not a JSON object'): read_labels(p, truth)
    p.write_text(json.dumps({'hello': 1}) + '\n')
    with pytest.raises(LabelsError, match=r'line 1: not a ragnb labels file'): read_labels(p, truth)
    p.write_text('')
    with pytest.raises(LabelsError, match='empty'): read_labels(p, truth)


def test_labels_file_resumes_in_plan_order(tmp_path, truth):
    p = labels_path(tmp_path/'results.json')
    assert p.name == 'results.labels.jsonl'
    plan = label_plan(truth, seed=3)
    assert plan == label_plan(truth, seed=3) and plan != label_plan(truth, seed=4)
    assert sorted(plan) == sorted(label_plan(truth, seed=4)) and len(plan) == 16 + 30
    rows = reference_labels(truth, plan[:2]) + reference_labels(truth, plan[2:3])[:2]   # the 3rd claim half done
    lab = add_labels(p, truth, rows, seed=3)
    assert next_claims(truth, lab, seed=3)[0] == plan[2] and len(next_claims(truth, lab, seed=3)) == 44
    assert read_labels(p, truth).header['seed'] == 3


def test_no_labels_gives_the_judges_figures_and_says_so(judged):
    c = corrected_metrics(judged, None)
    s = score(judged).overall
    flat = {k: v for g in s.values() for k, v in g.items()}
    for m in METRICS:
        assert round(c.table.judge[m], 1) == flat[m]
        assert c.table.corrected[m] == c.table.judge[m] and c.table.method[m] == 'judge only'
    assert 'uncorrected' in c.note


def test_every_claim_labelled_gives_the_truth_with_no_interval(truth, judged):
    lab = Labels(dataset_fingerprint(judged), reference_labels(truth, label_plan(judged)), {})
    c = corrected_metrics(judged, lab, draws=5, boot=5)
    exact = corrected_metrics(truth, None).table.judge
    np.testing.assert_allclose(c.table.corrected.to_numpy(float), exact.to_numpy(float), atol=1e-9)
    np.testing.assert_allclose((c.table.high - c.table.low).to_numpy(float), 0, atol=1e-9)
    assert set(c.table.method[list(PPI_METRICS)]) == {'PPI++'}
    assert set(c.table.method.drop(list(PPI_METRICS))) == {'calibrated'}


def test_ppi_intervals_cover_at_about_the_stated_rate(truth, judged):
    "Over 150 seeded samples of 20 claims, the PPI++ intervals hold the truth about 95% of the time; the judge is off."
    exact = corrected_metrics(truth, None).table.judge
    hits, err_j, err_c = {m: 0 for m in PPI_METRICS}, 0.0, 0.0
    for seed in range(150):
        lab = Labels(dataset_fingerprint(judged), reference_labels(truth, label_plan(judged, seed)[:20]), {})
        t = corrected_metrics(judged, lab, draws=0).table
        for m in PPI_METRICS:
            hits[m] += t.low[m] - 1e-9 <= exact[m] <= t.high[m] + 1e-9
            err_j += abs(t.judge[m] - exact[m]); err_c += abs(t.corrected[m] - exact[m])
    assert all(0.85 <= h / 150 <= 1 for h in hits.values()), hits
    assert err_c < 0.6 * err_j                          # corrected figures are closer to the truth than the judge's


def test_ppi_mean_matches_ppi_python():
    "With a separate unlabelled set and no finite-population correction: the figures ppi-python 0.2.3 printed."
    ref = json.loads((Path(__file__).parent/'data'/'ppi_python_0.2.3.json').read_text())
    for case in ref:
        got = ppi_mean(case['Y'], case['Yhat'], case['Yhat_unlabeled'], alpha=case['alpha'], finite=False)
        np.testing.assert_allclose([got['estimate'], got['low'], got['high']],
                                   [case['estimate'], case['low'], case['high']], rtol=1e-9)


def test_ppi_mean_edges():
    z, zh = np.array([1, 0, 1, 1.]), np.ones(4)
    assert ppi_mean([], [], zh)['estimate'] == 1.0 and ppi_mean([], [], zh)['n'] == 0
    e = ppi_mean(z[:1], zh[:1], zh)
    assert e['high'] == float('inf')                    # one label: no variance to speak of, no finite interval
    e = ppi_mean(z[:3], zh[:3], zh, var_floor=0.0)
    assert e['low'] < e['estimate'] < e['high']
