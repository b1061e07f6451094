"Issue 33: metrics corrected by a person's labels (labels file, PPI++ and calibrated estimates, planner, CLI)."
import copy, json
from pathlib import Path

import numpy as np
import pytest

from ragnb.check.corrected import (LabelsError, Labels, add_labels, read_labels, label_plan, next_claims,
                                   reference_labels, corrected_metrics, ppi_mean, dataset_fingerprint, PPI_METRICS,
                                   labels_path, simulated_judge)
from ragnb.check.metrics import load_results, score, METRICS
from ragnb.core.samples import sample_path


@pytest.fixture(scope='module')
def truth(): return load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))


biased = simulated_judge


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
    (row(ref=True), "must be text or a whole number, not true"),
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
        t = corrected_metrics(judged, lab, draws=0, min_claims=0).table   # the estimator itself, however few labels
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


# --- the command line, the widget, the comparison and the report ---

import io, subprocess, sys
from ragnb.view.label import Labeller, LabelWidget, label_loop, plot_corrected


CLI = 'from ragnb.app.cli import main; raise SystemExit(main())'

def ragnb(*args, stdin=''):
    return subprocess.run([sys.executable, '-c', CLI, *map(str, args)], input=stdin, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def judged_file(tmp_path, judged):
    p = tmp_path/'judged.json'
    p.write_text(json.dumps({'results': [r.to_dict() for r in judged]}))
    return p


def test_ragnb_label_then_metrics_with_labels(judged_file, truth):
    person = Labeller(truth, judged_file.parent/'unused.jsonl')
    todo = Labeller(judged_file).todo
    answers = ''.join(person.show(k)['judge'][0].lower() + '\n' for k in todo[:25]) + 'q\n'
    r = ragnb('label', judged_file, stdin=answers)
    assert r.returncode == 0, r.stderr
    labels = judged_file.parent/'judged.labels.jsonl'
    assert len(read_labels(labels, load_results(judged_file))) == 25
    assert 'Correct the metrics: ragnb metrics' in r.stderr
    r = ragnb('label', judged_file, stdin='e\nq\n')          # resumes: the 26th decision, not the first again
    lab = read_labels(labels, load_results(judged_file))
    assert len(lab) == 26 and (lab.rows[-1]['result'], lab.rows[-1]['side'], lab.rows[-1]['claim'],
                               lab.rows[-1]['ref']) == todo[25]
    r = ragnb('metrics', judged_file, '--labels', labels)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {'metrics', 'corrected'} and set(out['corrected']['metrics']) == set(METRICS)
    m = out['corrected']['metrics']['faithfulness']   # 26 decisions: too few claims behind it to move the judge's
    assert m['method'] == 'judge only' and m['low'] is None and m['corrected'] == m['judge'] and m['needs'] > 0
    assert "stay the judge's until at least 20 claims behind each are labelled" in r.stderr
    assert 'corrected by' in r.stderr and 'decisions labelled' in r.stderr
    r = ragnb('metrics', judged_file)
    assert r.returncode == 0 and 'uncorrected' in r.stderr


def test_metrics_with_a_bad_labels_file_prints_nothing(judged_file, judged):
    p = judged_file.parent/'bad.labels.jsonl'
    add_labels(p, judged, [row()])
    p.write_text(p.read_text() + json.dumps(row(claim=1, label='maybe')) + '\n')
    r = ragnb('metrics', judged_file, '--labels', p)
    assert r.returncode == 2 and r.stdout == ''
    assert f"{p}, line 3: unknown label 'maybe'" in r.stderr


def test_compare_with_labels(tmp_path, truth, judged):
    other = biased(truth, seed=5, up=0.1, down=0.3)
    files, labels = [], []
    for name, rs in (('one', judged), ('two', other)):
        f = tmp_path/f'{name}.json'; f.write_text(json.dumps({'results': [r.to_dict() for r in rs]}))
        lab = labels_path(f); add_labels(lab, rs, reference_labels(truth, label_plan(rs)[:30]))
        files.append(f); labels.append(lab)
    r = ragnb('compare', *files, '--labels', *labels, '--resamples', 200, '--out', tmp_path/'cmp')
    assert r.returncode == 0, r.stderr
    assert 'corrected by the labels, two - one' in r.stdout and 'no difference shown' in r.stdout
    assert (tmp_path/'cmp'/'corrected.csv').exists()
    r = ragnb('compare', *files, '--labels', labels[0])
    assert r.returncode == 2 and 'one labels file per results file' in r.stderr and r.stdout == ''


def test_widget_writes_each_click_and_escapes_text(tmp_path, truth):
    rs = copy.deepcopy(truth)
    rs[0].response_claims[0] = ['<script>alert(1)</script>', 'is', 'x']
    w = LabelWidget(rs, tmp_path/'w.labels.jsonl')
    w.lab.todo.sort(key=lambda k: k[:3] != ('0', 'response', 0))   # bring the hostile claim to the front
    w.refresh()
    assert '<script>' not in w.body.value and '&lt;script&gt;' in w.body.value
    assert 'judge said' not in w.body.value
    w.judge.value = True
    assert 'judge said' in w.body.value
    key = w.lab.current
    w.buttons[2].click()
    assert read_labels(tmp_path/'w.labels.jsonl', rs).by_key()[key] == 'Contradiction'
    bundle = w._repr_mimebundle_()
    assert '<script>' not in bundle['text/html']


def test_figure_and_demo_report(tmp_path, truth, judged):
    lab = Labels(dataset_fingerprint(judged), reference_labels(truth, label_plan(judged)[:10]))
    fig = plot_corrected(corrected_metrics(judged, lab, draws=10, boot=20))
    assert len(fig.axes[0].get_yticklabels()) == len(METRICS)
    from ragnb.app.demo import run_demo
    out = tmp_path/'demo'
    run_demo(out, mode='scripted', log=lambda s: None)
    assert 'Uncorrected' in (out/'report.html').read_text()
    checked = load_results(out/'ragchecker_output.json')
    plan = label_plan(checked)[:5]
    add_labels(out/'ragchecker_output.labels.jsonl', checked, reference_labels(checked, plan))
    run_demo(out, mode='scripted', log=lambda s: None)
    html = (out/'report.html').read_text()
    assert 'Corrected by your labels' in html and 'corrected_metrics.png' in html
    assert json.loads((out/'corrected_metrics.json').read_text())['decisions_labelled'] > 0


def test_labels_file_of_a_set_with_a_malformed_result_still_reads(tmp_path, truth, judged):
    "The labels name the whole file; a result the metrics leave out must not make them 'another dataset'."
    bad = copy.deepcopy(judged)
    bad[1].answer2response = ['Entailment']                 # wrong length: metrics leave result 1 out
    p = tmp_path/'bad.json'; p.write_text(json.dumps({'results': [r.to_dict() for r in bad]}))
    lab = labels_path(p)
    add_labels(lab, load_results(p), reference_labels(truth, [k for k in label_plan(bad) if k[0] == '0'][:5]))
    c = corrected_metrics(p, lab, draws=5, boot=5)
    assert c.labels > 0 and c.table.method['precision'] in ('PPI++', 'judge only')
