"Meta-evaluation against RAGChecker's human preference data."
import argparse, json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ragnb.metaeval import (ASPECTS, load_human, load_pair_scores, preference, correlations, bootstrap_ci,
                            annotator_agreement, meta_evaluate, add_cli)
from ragnb.samples import sample_path

META = sample_path('ragchecker', 'meta_evaluation')


@pytest.fixture(scope='module')
def human(): return load_human(META/'human_labeled_data.json')

@pytest.fixture(scope='module')
def pairs(): return load_pair_scores(META/'baseline_ragchecker.json')


def test_point_estimates_follow_ragcheckers_procedure(human, pairs):
    # the procedure written out directly on the raw files: score2 - score1, min-max to [-2, 2], repeated per annotator
    raw_h = json.loads((META/'human_labeled_data.json').read_text())
    raw_s = json.loads((META/'baseline_ragchecker.json').read_text())
    t = meta_evaluate(human, pairs, system='rc', n_boot=20).sort_index()
    for a in ASPECTS:
        d = np.array([r['model2']['ragchecker'][a] - r['model1']['ragchecker'][a] for r in raw_s])
        d = ((d - d.min()) / (d.max() - d.min()) - 0.5) * 4
        x, y = d[np.arange(560) // 2], np.array([r[a] for r in raw_h], float)
        got = t.loc[(a, f'rc: {a}')]['value']
        assert got['pearson'] == round(stats.pearsonr(x, y)[0] * 100, 2)
        assert got['spearman'] == round(stats.spearmanr(x, y)[0] * 100, 2)
        assert got['kendall'] == round(stats.kendalltau(x, y)[0] * 100, 2)
        ceiling = t.loc[(a, 'annotator vs annotator')]['value']
        assert ceiling['pearson'] == round(stats.pearsonr(y[0::2], y[1::2])[0] * 100, 2)
        assert (t.loc[a]['low'] <= t.loc[a]['value']).all() and (t.loc[a]['value'] <= t.loc[a]['high']).all()


def test_preference_scaling_and_median_fill(pairs):
    p = pairs.copy()
    p.iloc[0, p.columns.get_loc('overall_label/2')] = np.nan
    pref = preference(p, 'overall_label')
    assert pref.min() == -2 and pref.max() == 2 and not pref.isna().any()
    d = (p['overall_label/2'] - p['overall_label/1'])
    med = ((d.median() - d.min()) / (d.max() - d.min()) - .5) * 4
    assert pref.iloc[0] == pytest.approx(med)


def test_bootstrap_resamples_whole_groups():
    x = np.arange(20.); y = x.copy(); y[::2] = y[1::2]   # perfect within-group agreement structure
    ci = bootstrap_ci(x, x, np.repeat(np.arange(10), 2), n_boot=50)
    assert ci['pearson'] == pytest.approx((1.0, 1.0)) and ci['kendall'] == pytest.approx((1.0, 1.0))
    rng = np.random.default_rng(0); a, b = rng.normal(size=200), rng.normal(size=200)
    ci = bootstrap_ci(a, b, np.arange(200), n_boot=300)
    for k in ('pearson', 'spearman', 'kendall'): assert ci[k][0] < 0 < ci[k][1]
    # unequal group sizes take the general path and agree in spirit
    ci = bootstrap_ci(a, a + rng.normal(size=200) * .1, np.r_[np.arange(100), np.arange(100) // 2 + 100], n_boot=50)
    assert ci['pearson'][0] > .9


def test_annotators_aligned_by_pair(human):
    a1, a2, ids = annotator_agreement(human, 'overall_label')
    assert len(ids) == 280 and np.array_equal(ids, np.arange(280))


def test_missing_field_is_named(tmp_path):
    rows = json.loads((META/'human_labeled_data.json').read_text())[:4]
    del rows[3]['overall_label']
    (tmp_path/'h.json').write_text(json.dumps(rows))
    with pytest.raises(ValueError, match="row 3 .*'overall_label' is missing"): load_human(tmp_path/'h.json')


def test_cli(capsys):
    ap = argparse.ArgumentParser(); add_cli(ap.add_subparsers())
    args = ap.parse_args(['meta-eval', '--human', str(META/'human_labeled_data.json'), '--scores',
                          str(META/'baseline_ragchecker.json'), '--boot', '20'])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert 'annotator vs annotator' in out and 'baseline_ragchecker: overall_label' in out and 'kendall' in out


def test_pairs_from_ragnb_scores_correlate_like_the_file(human, pairs):
    from ragnb.metaeval import pairs_from_scores
    import pandas as pd
    first = pd.DataFrame({'f1': pairs['overall_label/1'], 'name': 'x'})
    second = pd.DataFrame({'f1': pairs['overall_label/2'], 'name': 'y'})
    p = pairs_from_scores(first, second)
    assert list(p.columns) == ['f1/1', 'f1/2']
    a = meta_evaluate(human, p, metrics=['f1'], n_boot=10).sort_index().loc[('overall_label', 'metric: f1'), 'value']
    b = meta_evaluate(human, pairs, n_boot=10).sort_index().loc[('overall_label', 'metric: overall_label'), 'value']
    assert a.equals(b)
    with pytest.raises(ValueError, match='same pair ids'): pairs_from_scores(first, second.iloc[::-1])
