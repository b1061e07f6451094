"Widget logic without a browser: state changes on click, saved decisions, safe HTML, metric sets that match ragnb.check.metrics."
import copy, json
from pathlib import Path

import matplotlib
matplotlib.use('Agg')
import numpy as np
import pandas as pd
import pytest

from ragnb.view.widgets import (Stepper, StepView, PageView, ParsingViewer, img_tag, page_html, safe_table, evidence_span, highlight,
                           ReviewState, ReviewViewer, metric_sets, response_claim_roles, gt_claim_roles, MetricsViewer,
                           evidence_window, passage_html, PT_PX)
from ragnb.core.samples import sample_path

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
    item = lambda: v.body.value.split('>', 1)[1].removesuffix('</div>')  # the rendered item inside the body's wrapper
    assert (item(), v.prev.disabled, v.next.disabled) == ('<p>0</p>', True, False)
    v.next.click()
    assert (item(), v.slider.value, v.pos.value) == ('<p>1</p>', 2, '2 / 4')
    v.slider.value = 4
    assert (item(), v.next.disabled) == ('<p>3</p>', True)
    v.next.click()  # at the end: stays
    assert item() == '<p>3</p>'
    v.prev.click()
    assert item() == '<p>2</p>'


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
    from ragnb.docs.pdf import parse_pdf
    from ragnb.core.calls import Failure
    parsed = parse_pdf(PDF, tmp_path / 'eu4', offline=True, pages=[2], page_zoom=1, crop_zoom=1)
    pv = ParsingViewer(parsed)
    body = pv.view.body.value
    assert 'Table 6.1' in body and 'offline: PyMuPDF' in body and '<table>' in body and 'ragnb offline parse' not in body
    assert body.count('<figcaption') == len(list((tmp_path / 'eu4').glob(f'{parsed.doc}_2_*.png'))) > 0
    page = parsed.pages[0]
    page.failure, page.markdown, page.tables = Failure(item_id='p2', kind='timeout', message='no reply in 60 s', attempts=4), '', {}
    assert 'failed: timeout: no reply in 60 s' in ParsingViewer([page]).view.body.value


def test_parsing_viewer_labels_crops_with_kind_and_source(tmp_path):
    from ragnb.docs.pdf import Region, parse_pdf
    from ragnb.view.plots import REGION_STYLES
    parsed = parse_pdf(PDF, tmp_path / 'eu4', offline=True, pages=[2], page_zoom=1, crop_zoom=1)
    v = ParsingViewer(parsed).pages[0]
    assert set(v.regions) == set(v.crops) and {k for k, _ in v.regions.values()} == {'table'}  # eu-004 p2: two tables
    body = page_html(v)
    assert body.count(f'color:{REGION_STYLES["table"][0]}') == len(v.regions) and all('+'.join(s) in body for _, s in v.regions.values())
    # regions given explicitly label the crops of the same name; a crop without a region has no label
    pv = ParsingViewer([PageView(2, crops={'a_2_1.png': '/nonexistent/a.png', 'a_2_2.png': '/nonexistent/b.png'})],
                       regions=[Region('a', 2, 1, (0, 0, 9, 9), kind='figure', source=('drawings', 'layout'))])
    assert pv.pages[0].regions == {'a_2_1.png': ('figure', ('drawings', 'layout'))}
    body = pv.view.body.value
    assert f'color:{REGION_STYLES["figure"][0]}' in body and 'drawings+layout' in body and body.count('drawings+layout') == 1

def test_evidence_span_exact_fuzzy_and_missing():
    ctx = 'First line.\nThe key is called `OPENAI_API_KEY` and goes in .env files.\nLast.'
    assert evidence_span('Last.', ctx) == (len(ctx) - 5, len(ctx))
    a, b = evidence_span('The key is called OPENAI_API_KEY and goes in .env files.', ctx)
    assert 'OPENAI_API_KEY' in ctx[a:b]
    assert evidence_span('Completely unrelated sentence about rivers and mountains', ctx) is None
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
    with pytest.raises(ValueError, match='row 1: an edit needs'):
        st.decide('edit')
    with pytest.raises(KeyError, match='context'):
        ReviewState(_dataset().drop(columns='context'))
    with pytest.raises(KeyError, match="'kept'"):
        ReviewState(_dataset().drop(columns='kept')).agreement()
    with pytest.raises(ValueError, match='.jsonl or .parquet'):
        st.save('x.csv')


def test_metric_sets_agree_with_ragnb_metrics():
    from ragnb.check.metrics import score
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


# --- what a workshop needs: evidence in view, one numbering, snapshots for saved notebooks, the model named ---

ARTICLE = sample_path('openai-cookbook', 'articles', 'techniques_to_improve_reliability.md')


def _visible_before_mark(body:str) -> str:
    "The passage text a reviewer sees above the highlight, before opening 'the whole passage'."
    import html, re
    box = body[body.index('ragnb-passage'):]
    box = box[:box.index('<details>')] if '<details>' in box else box
    return html.unescape(re.sub(r'<[^>]+>', '', box[box.index('>') + 1:box.index('<mark>')]))


def test_review_shows_late_evidence_without_scrolling():
    "A 3,000-character passage whose evidence is its last sentence: the highlight is near the top of the passage box."
    text = ARTICLE.read_text()
    ctx = text[:3000]
    evidence = ctx[ctx.rindex('. ', 0, 2900) + 2:][:120].rsplit(' ', 1)[0]
    assert ctx.index(evidence) > 2500
    df = pd.DataFrame({'context': [ctx], 'question': ['q?'], 'answer': ['a'], 'evidence': [evidence]})
    body = ReviewViewer(df).view.body.value
    seen = _visible_before_mark(body)
    assert len(seen) <= 400 and 'characters before]' in seen  # at most a few lines above it, and it says what is cut
    assert f'the whole passage ({len(ctx):,} characters)' in body and body.count('<mark>') == 2
    assert 'line-height:1.45' in body  # not ipywidgets' 28 px line height


def test_evidence_window_cuts_between_words_and_keeps_short_passages_whole():
    ctx = 'alpha beta gamma ' * 100 + 'THE EVIDENCE SENTENCE.' + ' delta epsilon' * 100
    span = evidence_span('THE EVIDENCE SENTENCE.', ctx)
    lo, hi = evidence_window(ctx, span, before=50, after=50)
    assert span[0] - 50 <= lo <= span[0] and span[1] <= hi <= span[1] + 50
    assert ctx[lo - 1] == ' ' and ctx[hi] == ' '
    short = 'One. Two. Three.'
    assert evidence_window(short, evidence_span('Two.', short)) == (0, len(short))
    assert '<details>' not in passage_html(short, 'Two.')
    code = 'x = 1\n' * 200 + 'The evidence after many short lines.'
    lo, _ = evidence_window(code, evidence_span('The evidence after many short lines.', code))
    assert code[lo:].count('\n') == 4  # short lines above the evidence are limited too, not only characters
    missing = passage_html(ctx, 'nothing like this is anywhere in it at all, really')
    assert 'evidence not found' in missing and '<mark>' not in missing


def test_review_edit_fields_are_wide_and_show_the_edit_when_you_come_back():
    import ipywidgets as W
    rv = ReviewViewer(_dataset())
    assert isinstance(rv.q, W.Textarea) and isinstance(rv.a, W.Textarea)
    assert rv.q.layout.width == rv.a.layout.width == '100%'
    rv.view.next.click()
    rv.q.value, rv.a.value = 'Which programming language is used here?', 'Python 3'
    rv.save_edit.click()                    # saved; moves on to row 3
    assert rv.q.value == 'What?'
    rv.view.prev.click()                    # back to the edited row
    assert (rv.q.value, rv.a.value) == ('Which programming language is used here?', 'Python 3')
    rv.view.prev.click()
    assert rv.q.value == 'How long is the Nile?'  # a row without an edit shows its own question


def test_people_count_from_one():
    rv = ReviewViewer(_dataset())
    assert rv.view.pos.value == '1 / 3' and 'row 1' in rv.view.body.value and 'row 0' not in rv.view.body.value
    rv.view.next.click()
    assert rv.view.pos.value == '2 / 3' and 'row 2' in rv.view.body.value


def test_chunks_have_one_name_in_map_text_and_tables():
    import re
    from ragnb.view.plots import plot_entailment_map, chunk_labels
    r = json.loads(OUTPUTS.read_text())['results'][0]
    names = chunk_labels(r)
    assert names == ['c1', 'c2', 'c3', 'c4']
    ticks = {t.get_text().split()[0] for t in plot_entailment_map(r, key=True).axes[0].get_xticklabels()}
    body = MetricsViewer([r]).view.body.value
    in_tables = set(re.findall(r'<td>((?:c\d+, )*c\d+)</td>', body))
    in_tables = {c for cell in in_tables for c in cell.split(', ')}
    in_text = set(re.findall(r'\bc\d+\b', body[body.index('<th>which</th>'):body.index('<details')]))
    assert ticks == set(names) and in_tables <= set(names) and in_text <= set(names) and in_tables and in_text
    assert metric_sets(r)['context_precision'] == (['c1', 'c2', 'c4'], names)
    assert 'chunk 0' not in body and 'chunk 000' not in body


def test_every_viewer_carries_a_static_snapshot_of_its_current_item():
    pv = ParsingViewer([PageView(1, PNG, {}, 'first page text'), PageView(2, None, {}, 'second page text')])
    rv = ReviewViewer(_dataset())
    for viewer, now, later in ((pv, 'first page text', 'second page text'), (rv, 'How long is the Nile?', 'Which language?')):
        b = viewer._repr_mimebundle_()
        assert 'application/vnd.jupyter.widget-view+json' in b  # the live widget
        assert now in b['text/html'] and 'item 1 of' in b['text/html'] and later not in b['text/html']
        assert not b['text/plain'].startswith('VBox(')
        viewer.view.next.click()
        assert later in viewer._repr_mimebundle_()['text/html']  # the snapshot follows the current item


def test_metrics_viewer_snapshot_and_model(tmp_path):
    rc = json.loads(OUTPUTS.read_text())
    mv = MetricsViewer(rc, model='scripted-test-model')
    b = mv._repr_mimebundle_()
    assert 'longest river' in b['text/html'] and 'model: scripted (scripted-test-model)' in b['text/html']
    assert 'model: scripted (scripted-test-model)' in b['text/plain']
    assert MetricsViewer(rc).view.subtitle == 'model: not recorded'


def test_viewers_name_the_model():
    df = _dataset().assign(generator_model='scripted-test-model', critic_model='scripted-test-model')
    assert ReviewViewer(df).view.subtitle == 'model: scripted (scripted-test-model)'
    df = df.assign(critic_model='gpt-4o')
    assert ReviewViewer(df).view.subtitle == 'generator: scripted (scripted-test-model) \u00b7 critic: gpt-4o'
    assert ReviewViewer(_dataset()).view.subtitle == 'model not recorded'
    assert 'model: gpt-4o-mini' in ReviewViewer(_dataset(), model='gpt-4o-mini').view.snapshot()
    assert ParsingViewer([PageView(1, PNG)], model='gpt-4o').view.subtitle == 'model: gpt-4o'


def test_page_image_is_shown_at_a_fixed_scale_per_point():
    "At PT_PX screen pixels a PDF point, the 8 pt labels ragnb.docs.pdf writes on a marked page read at 10 px or more."
    import inspect
    from ragnb.docs.pdf import mark_page
    assert inspect.signature(mark_page).parameters['fontsize'].default * PT_PX >= 10
    body = page_html(PageView(1, PNG, page_width=595))
    assert f'width:{round(595 * PT_PX)}px' in body
    assert 'max-width:460px' in page_html(PageView(1, PNG))  # page size unknown: the old cap
    assert 'word-break:normal' in body and 'overflow-wrap:break-word' in body  # wrap between words only


NOTEBOOK_CELLS = ['''import json, pandas as pd
from ragnb.view.widgets import ReviewViewer, MetricsViewer
from ragnb.view.plots import plot_hit_rate
rv = ReviewViewer(pd.DataFrame({'context': ['The Nile is about 6,650 km long. The Amazon may be longer.'],
    'question': ['How long is the Nile?'], 'answer': ['About 6,650 km'], 'evidence': ['The Nile is about 6,650 km long.']}),
    model='scripted-test-model')
rv''', '''plot_hit_rate(pd.DataFrame({'k': [1, 3], 'hit_rate': [.5, .75]}))''',
'''mv = MetricsViewer(json.load(open({path!r}))['results'])
mv''']


def test_exported_html_shows_each_viewer_and_figure(tmp_path):
    "A notebook run under MPLBACKEND=Agg and exported by nbconvert shows the viewers' items and the figure, not blanks."
    import copy, os, re, nbformat
    from unittest import mock
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    nb = nbformat.v4.new_notebook(metadata={'kernelspec': {'name': 'python3', 'display_name': 'python3', 'language': 'python'}})
    nb.cells = [nbformat.v4.new_code_cell(c.replace('{path!r}', repr(str(OUTPUTS)))) for c in NOTEBOOK_CELLS]
    with mock.patch.dict(os.environ, MPLBACKEND='Agg'):  # the kernel inherits it: no inline backend
        NotebookClient(nb, timeout=120, kernel_name='python3', resources={'metadata': {'path': str(tmp_path)}}).execute()
    review, figure, metrics = (c.outputs[-1]['data'] for c in nb.cells)
    assert figure['image/png'] and 'text/html' in review and 'text/html' in metrics
    # saved without widget state (JupyterLab's default, nbdev, nbconvert with store_widget_state=False): the snapshot shows
    bare = copy.deepcopy(nb); bare.metadata.pop('widgets')
    page = HTMLExporter().from_notebook_node(bare)[0]
    shown = re.sub(r'<script.*?</script>', '', page, flags=re.S)  # what a reader sees without running any script
    assert 'The Nile is about 6,650 km long.</mark>' in shown and 'model: scripted (scripted-test-model)' in shown
    assert 'longest river in the world?</h4>' in shown and 'hallucination' in shown
    assert re.search(r'<img[^>]+src="data:image/png;base64', shown)  # the figure, as an image
    # saved with widget state (nbclient's default): the page embeds the state, which the widget manager draws
    page = HTMLExporter().from_notebook_node(nb)[0]
    state = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page, flags=re.S).group(1)
    assert 'The Nile is about 6,650 km long.&lt;/mark&gt;' in state or 'The Nile is about 6,650 km long.</mark>' in state.replace('\\/', '/')
