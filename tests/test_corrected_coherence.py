"""Corrected figures are coherent at every number of labels (hostile round 4: after 80 labels, corrected recall 106.1
with an interval of 79.6-100): each estimate inside its own interval, both within 0-100, `compare` included."""
import numpy as np
import pytest

from ragnb.check.corrected import compare_corrected, corrected_metrics, label_plan, reference_labels, simulated_judge
from ragnb.check.metrics import load_results
from ragnb.core.samples import sample_path


@pytest.fixture(scope='module')
def truth(): return load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))


def _coherent(t, lo=0, hi=100):
    bad = []
    for m, r in t.iterrows():
        if not (lo <= r.corrected <= hi): bad.append((m, 'estimate', r.corrected))
        if r.low == r.low and not (lo <= r.low <= r.corrected <= r.high <= hi): bad.append((m, r.low, r.corrected, r.high))
    return bad


@pytest.mark.parametrize('n_claims', [1, 3, 10, 40, 80])
def test_every_figure_is_inside_its_interval_and_0_to_100(truth, n_claims):
    bad = []
    for seed in range(4):
        judged = simulated_judge(truth, seed=seed)
        plan = label_plan(truth, seed)
        rows = reference_labels(truth, plan[:n_claims])
        c = corrected_metrics(judged, _labels(judged, rows), draws=40, boot=60, seed=seed)
        bad += [(seed, *b) for b in _coherent(c.table)]
        other = corrected_metrics(simulated_judge(truth, seed=seed + 10), _labels(judged, rows), draws=40, boot=60)
        cmp = compare_corrected(c, other)
        for m, r in cmp.iterrows():
            if r.low == r.low and not (-100 <= r.low <= r.difference <= r.high <= 100): bad.append((seed, m, 'compare'))
    assert not bad, bad[:10]


def _labels(results, rows):
    from ragnb.check.corrected import Labels, dataset_fingerprint
    return Labels(dataset_fingerprint(results), rows, {})
