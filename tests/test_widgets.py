"Widget logic without a browser: state changes on click, saved decisions, safe HTML, metric sets that match ragnb.metrics."
import copy, json
from pathlib import Path

import matplotlib
matplotlib.use('Agg')
import numpy as np
import pandas as pd
import pytest

from ragnb.widgets import (Stepper, StepView, PageView, ParsingViewer, img_tag, page_html, safe_table, find_evidence, highlight,
                           ReviewState, ReviewViewer, metric_sets, response_claim_roles, gt_claim_roles, MetricsViewer)
from ragnb.samples import sample_path

OUTPUTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')
PNG = bytes.fromhex('89504e470d0a1a0a0000000d4948445200000001000000010806000000'
                    '1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082')


def test_stepper_moves_clamps_and_tells_listeners():
    s, seen = Stepper(3), []
    s.listeners.append(seen.append)
    s.next(); s.next(); s.next(); s.prev(); s.goto(0)
    assert seen == [1, 2, 2, 1, 0]
    with pytest.raises(IndexError, match='there are 3'):
        s.goto(3)
    with pytest.raises(ValueError, match='0 items'):
        Stepper(0)


def test_stepview_buttons_and_slider_change_the_body():
    v = StepView(Stepper(4), lambda i: f'<p>{i}</p>')
    assert (v.body.value, v.prev.disabled, v.next.disabled) == ('<p>0</p>', True, False)
    v.next.click()
    assert (v.body.value, v.slider.value, v.pos.value) == ('<p>1</p>', 2, '2 / 4')
    v.slider.value = 4
    assert (v.body.value, v.next.disabled) == ('<p>3</p>', True)
    v.next.click()  # at the end: stays
    assert v.body.value == '<p>3</p>'
    v.prev.click()
    assert v.body.value == '<p>2</p>'


def test_stepview_draws_each_move_once():
    calls = []
    v = StepView(Stepper(3), lambda i: calls.append(i) or str(i))
    v.next.click(); v.slider.value = 3; v.prev.click()
    assert calls == [0, 1, 2, 1]


def test_safe_table_strips_scripts_and_handlers():
    out = safe_table('<table><tr><td onmouseover="x()" rowspan="2">1<img src=x onerror=alert(1)>'
                     '<script>evil()</script></td><th style="color:red">h</th></tr></table>')
    assert 'script' not in out and 'onmouseover' not in out and 'onerror' not in out and '<img' not in out
    assert 'style' not in out and 'rowspan="2"' in out and '<th>h</th>' in out


def test_parsing_view_escapes_markdown_and_sanitises_tables():
    pages = [PageView(1, PNG, {'d_1_1.png': PNG}, '# Title\n<script>alert(1)</script>',
                      {'table_1': '<table onclick="x"><tr><td>7</td></tr></table>'}),
             PageView(2, None, {}, 'page two text', {}, note='offline')]
    pv = ParsingViewer(pages)
    body = pv.view.body.value
    assert '&lt;script&gt;' in body and '<script>' not in body and 'onclick' not in body and '<td>7</td>' in body
    assert body.count('data:image/png;base64,') == 2 and 'd_1_1.png' in body
    pv.view.next.click()
    assert 'page two text' in pv.view.body.value and 'no page image' in pv.view.body.value
    assert 'image not found' in img_tag('/nonexistent/x.png')


PDF = sample_path('documents', 'camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/eu-004.pdf')


def test_parsing_viewer_shows_ragnb_pdf_pages(tmp_path):
    from ragnb.pdf import parse_pdf
    from ragnb.llm import Failure
    parsed = parse_pdf(PDF, tmp_path / 'eu4', offline=True, pages=[2], page_zoom=1, crop_zoom=1)
    pv = ParsingViewer(parsed)
    body = pv.view.body.value
    assert 'Table 6.1' in body and 'offline: PyMuPDF' in body and '<table>' in body and 'ragnb offline parse' not in body
    assert body.count('<figcaption') == len(list((tmp_path / 'eu4').glob(f'{parsed.doc}_2_*.png'))) > 0
    page = parsed.pages[0]
    page.failure, page.markdown, page.tables = Failure(item_id='p2', kind='timeout', message='no reply in 60 s', attempts=4), '', {}
    assert 'failed: timeout: no reply in 60 s' in ParsingViewer([page]).view.body.value


def test_find_evidence_exact_fuzzy_and_missing():
    ctx = 'First line.\nThe key is called `OPENAI_API_KEY` and goes in .env files.\nLast.'
    assert find_evidence(ctx, 'Last.') == (len(ctx) - 5, len(ctx))
    a, b = find_evidence(ctx, 'The key is called OPENAI_API_KEY and goes in .env files.')
    assert 'OPENAI_API_KEY' in ctx[a:b]
    assert find_evidence(ctx, 'Completely unrelated sentence about rivers and mountains') is None
    h = highlight('<b>x</b> and y', 'and y')
    assert h == '&lt;b&gt;x&lt;/b&gt; <mark>and y</mark>'
    assert 'evidence not found' in highlight('abc', 'zzzzzzzzzzzzzz')


def _dataset():
    return pd.DataFrame({'context': ['The Nile is 6,650 km long. <i>Egypt</i>.', 'Python is used.', 'Other text.'],
                         'question': ['How long is the Nile?', 'Which language?', 'What?'],
                         'answer': ['6,650 km', 'Python', '?'],
                         'evidence': ['The Nile is 6,650 km long.', 'Python is used.', 'Other text.'],
                         'groundedness_score': [5, 4, 1], 'groundedness_eval': ['clear', 'ok', '<b>bad</b>'],
                         'relevance_score': [5, 4, 2], 'relevance_eval': ['', '', ''],
                         'standalone_score': [5, np.nan, 1], 'standalone_eval': ['', 'call failed', ''],
                         'kept': [True, False, False]})


def test_review_decisions_are_saved_in_the_dataset(tmp_path):
    rv = ReviewViewer(_dataset())
    assert '<mark>The Nile is 6,650 km long.</mark>' in rv.view.body.value and '&lt;i&gt;Egypt' in rv.view.body.value
    rv.accept.click()                      # row 0 accepted, moves on
    assert rv.state.stepper.i == 1 and 'Which language?' in rv.view.body.value
    assert '\u2014' in rv.view.body.value  # the failed standalone score shows as a dash, not NaN
    rv.q.value = 'Which programming language is used?'
    rv.save_edit.click()                   # row 1 edited
    rv.reject.click()                      # row 2 rejected, stays at the end
    df = rv.state.df
    assert list(df.review) == ['accept', 'edit', 'reject']
    assert df.review_question[1] == 'Which programming language is used?' and df.review_answer[1] == 'Python'
    assert pd.isna(df.review_question[0])
    assert '&lt;b&gt;bad' in rv.view.body.value and 'review: <b>reject</b>' in rv.view.body.value
    assert '3 reviewed: 1 accept, 1 edit, 1 reject' in rv.state._repr_html_()
    ag = rv.state.agreement()
    assert ag.loc['keep', 'keep'] == 1 and ag.loc['keep', 'drop'] == 1 and ag.loc['drop', 'drop'] == 1
    back = pd.read_json(rv.state.save(tmp_path / 'r.jsonl'), lines=True)
    assert list(back.review) == ['accept', 'edit', 'reject']
    assert list(pd.read_parquet(rv.state.save(tmp_path / 'r.parquet')).review) == ['accept', 'edit', 'reject']


def test_review_rejects_bad_decisions_and_input():
    st = ReviewState(_dataset())
    with pytest.raises(ValueError, match='accept, reject or edit'):
        st.decide('maybe')
    with pytest.raises(ValueError, match='row 0: an edit needs'):
        st.decide('edit')
    with pytest.raises(KeyError, match='context'):
        ReviewState(_dataset().drop(columns='context'))
    with pytest.raises(KeyError, match="'kept'"):
        ReviewState(_dataset().drop(columns='kept')).agreement()
    with pytest.raises(ValueError, match='.jsonl or .parquet'):
        st.save('x.csv')


def test_metric_sets_agree_with_ragnb_metrics():
    from ragnb.metrics import score
    rc = json.loads(OUTPUTS.read_text())
    per = score(rc['results']).per_result
    for r in rc['results']:
        for m, (num, den) in metric_sets(r).items():
            if m == 'f1': continue
            assert (len(num) / len(den) if den else 0.0) == pytest.approx(per.loc[r['query_id'], m], abs=1e-12), m
    roles = response_claim_roles(rc['results'][0])
    assert roles.role.value_counts().to_dict() == {'correct': 8, 'relevant noise': 2, 'hallucination': 1}
    assert list(roles.id[roles.role == 'hallucination']) == ['R11']
    assert gt_claim_roles(rc['results'][0]).retrieved.sum() == 5


def test_metrics_viewer_steps_through_results():
    rc = json.loads(OUTPUTS.read_text())
    mv = MetricsViewer(rc['results'])
    first = mv.view.body.value
    assert 'longest river' in first and 'hallucination' in first and '1 of 11' in first
    mv.view.next.click()
    assert 'Congo flag' in mv.view.body.value and mv.view.body.value != first
    assert MetricsViewer(rc).view.body.value == first  # the JSON dict works as well as its list
    bad = copy.deepcopy(rc['results'])
    bad[1]['answer2response'] = None
    mv = MetricsViewer(bad)
    mv.stepper.goto(1)
    assert 'answer2response' in mv.view.body.value
