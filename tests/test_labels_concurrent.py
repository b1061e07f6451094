"""Two labellers on one labels file (hostile round 4): no label is ever lost, and a labeller whose decision was taken
meanwhile skips it, says so and moves on, in the notebook widget, the terminal loop and `ragnb label`."""
import io, json, subprocess, sys, textwrap

import pytest

from ragnb.check.corrected import add_labels, read_labels, label_plan, claim_refs
from ragnb.check.metrics import load_results
from ragnb.core.samples import sample_path
from ragnb.view.label import Labeller, LabelWidget, label_loop

RESULTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')


@pytest.fixture(scope='module')
def results(): return load_results(RESULTS)


def _keys(results):
    index = {r.query_id: r for r in results}
    return [(q, s, i, ref) for q, s, i in label_plan(results) for ref in claim_refs(index[q], s)]


def test_two_processes_adding_labels_at_once_lose_none(tmp_path, results):
    keys = _keys(results)[:60]
    path = tmp_path/'example.labels.jsonl'
    code = textwrap.dedent(f"""
        import sys
        from ragnb.check.corrected import add_labels
        from ragnb.check.metrics import load_results
        results = load_results({str(RESULTS)!r})
        keys = {keys!r}
        for q, s, i, ref in keys[int(sys.argv[1])::2]:   # each writer its own 30 decisions, one write per label
            add_labels({str(path)!r}, results, [dict(result=q, side=s, claim=i, ref=ref, label='Neutral')])
        """)
    ps = [subprocess.Popen([sys.executable, '-c', code, str(k)], stderr=subprocess.PIPE, text=True) for k in (0, 1)]
    for p in ps: assert p.wait(timeout=300) == 0, p.stderr.read()
    got = read_labels(path, results)
    assert len(got) == 60 and set(got.by_key()) == set(keys)   # before: 29-30 of the 60 were kept


def test_a_decision_labelled_meanwhile_is_skipped_said_and_passed(tmp_path, results):
    path = tmp_path/'l.jsonl'
    a, b = Labeller(results, path), Labeller(results, path)
    first = a.current
    assert b.current == first
    a.label('e')
    b.label('n')   # b's decision was taken by a meanwhile: not written, said, and b moves on
    assert b.note and 'labelled meanwhile by another labeller' in b.note and b.current != first
    got = read_labels(path, results).by_key()
    assert got[first] == 'Entailment' and len(got) == 1
    b.label('c')   # b's next decision is its own
    assert b.note is None and len(read_labels(path, results)) == 2
    # the widget says so and moves on, instead of "not saved" on every click
    w1, w2 = LabelWidget(results, tmp_path/'w.jsonl'), LabelWidget(results, tmp_path/'w.jsonl')
    w1.choose('Entailment'); w2.choose('Neutral')
    assert 'labelled meanwhile' in w2.status.value and 'not saved' not in w2.status.value
    assert w2.lab.current == w1.lab.current   # both now at the next decision
    # the terminal loop: the second labeller's answer to a taken decision is said, and the loop goes on
    c, d = Labeller(results, tmp_path/'t.jsonl'), Labeller(results, tmp_path/'t.jsonl')
    c.label('e')
    out = io.StringIO()
    assert label_loop(d, io.StringIO('n\nc\nq\n'), out) == 1
    assert 'labelled meanwhile by another labeller' in out.getvalue()
    assert len(read_labels(tmp_path/'t.jsonl', results)) == 2
