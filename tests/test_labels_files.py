"""Labels and results files from elsewhere (hostile round 4): checked as they are read, wrong JSON types named, half
characters named by field, malformed results named and left out before anyone labels; one line each, no traceback."""
import json, subprocess, sys

import pytest

from ragnb.check.corrected import LabelsError, add_labels, read_labels, label_plan
from ragnb.check.metrics import load_results
from ragnb.core.samples import sample_path

RESULTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')
CLI = 'from ragnb.app.cli import main; raise SystemExit(main())'


def ragnb(*args, stdin=''):
    return subprocess.run([sys.executable, '-c', CLI, *map(str, args)], input=stdin, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope='module')
def results(): return load_results(RESULTS)


def _header(path, results):
    add_labels(path, results, [])   # a new file: its header line only
    return path.read_text()


def test_a_bad_line_is_refused_where_it_is_not_after_reading_every_line(tmp_path, results):
    p = tmp_path/'l.jsonl'
    head = _header(p, results)
    p.write_text(head + '{}\n' + 'not json\n' + '{}\n' * 200_000)   # before: every line parsed first, line 3 named
    with pytest.raises(LabelsError, match=r"line 2: field 'result' is missing"): read_labels(p, results)


@pytest.mark.parametrize('field,value,says', [
    ('side', [], "field 'side' must be text, not []"),
    ('side', {}, "field 'side' must be text, not {}"),
    ('ref', 0.0, "field 'ref' must be text or a whole number, not 0.0"),
    ('ref', True, "field 'ref' must be text or a whole number, not true"),
    ('label', ['Entailment'], "field 'label' must be text"),
])
def test_wrong_json_types_in_a_labels_file_are_named(tmp_path, results, field, value, says):
    p = tmp_path/'l.jsonl'
    row = {**dict(result=results[0].query_id, side='response', claim=0, ref='answer', label='Entailment'), field: value}
    p.write_text(_header(p, results) + json.dumps(row) + '\n')
    with pytest.raises(LabelsError, match='line 2: ' + __import__('re').escape(says)): read_labels(p, results)
    r = ragnb('metrics', RESULTS, '--labels', p)
    assert r.returncode == 2 and says in r.stderr and 'Traceback' not in r.stderr, r.stderr


@pytest.mark.parametrize('seed', [None, 'Infinity', [1], 1.5, True, -1])
def test_a_bad_header_seed_is_named_not_a_traceback(tmp_path, results, seed):
    p = tmp_path/'example.labels.jsonl'
    head = json.loads(_header(p, results))
    p.write_text(json.dumps({**head, 'seed': seed}).replace('"Infinity"', 'Infinity') + '\n')
    with pytest.raises(LabelsError, match="the header's seed must be a whole number"): read_labels(p, results)
    r = ragnb('label', RESULTS, '--labels', p, stdin='q\n')
    assert r.returncode == 2 and "the header's seed must be a whole number" in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr


def test_a_lone_surrogate_is_named_by_row_and_field(tmp_path):
    d = json.loads(RESULTS.read_text())
    raw = json.dumps(d).replace('"response": "', '"response": "\\ud83d ', 1)   # half an emoji in the first response
    bad = tmp_path/'bad.json'; bad.write_text(raw)
    for argv in (['inspect', bad], ['label', bad], ['metrics', bad]):
        r = ragnb(*argv, stdin='e\nq\n')
        assert r.returncode in (1, 2) and "result 0 (query_id '0'), field 'response': a lone surrogate" in r.stderr, (argv, r.stderr)
        assert 'Traceback' not in r.stderr and 'codec' not in r.stderr
    ds = tmp_path/'ds.jsonl'
    ds.write_text('{"id": "q0", "question": "ok", "answer": "a"}\n{"id": "q1", "question": "bad \\udc00", "answer": "a"}\n')
    r = ragnb('inspect', ds)
    assert r.returncode != 0 and "line 2: field 'question' holds a lone surrogate" in r.stderr, r.stderr


def test_label_checks_results_up_front_as_metrics_does(tmp_path):
    d = json.loads(RESULTS.read_text())
    short = json.loads(json.dumps(d))
    short['results'][0]['retrieved2response'] = short['results'][0]['retrieved2response'][:1]   # shorter than claims
    p = tmp_path/'short.json'; p.write_text(json.dumps(short))
    r = ragnb('label', p, '--limit', '1', stdin='e\n' * 30 + 'q\n')
    assert r.returncode == 0 and 'left out' in r.stderr and 'retrieved2response' in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr
    labelled = {json.loads(l).get('result') for l in (tmp_path/'short.labels.jsonl').read_text().splitlines()[1:]}
    assert labelled and short['results'][0]['query_id'] not in labelled   # only well-formed results are labelled
    dup = json.loads(json.dumps(d)); dup['results'][1]['query_id'] = dup['results'][0]['query_id']
    p2 = tmp_path/'dup.json'; p2.write_text(json.dumps(dup))
    r = ragnb('label', p2, stdin='e\n' * 12 + 'q\n')
    assert r.returncode == 2 and 'occur more than once' in r.stderr and not (tmp_path/'dup.labels.jsonl').exists()
