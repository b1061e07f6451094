"Figures draw from RAGChecker's own files, fail loudly on bad input, and save in the format the extension names."
import json, copy
from pathlib import Path

import matplotlib
matplotlib.use('Agg')
import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from ragnb.view.plots import (save_figure, plot_entailment_map, plot_metrics, plot_systems, plot_claim_shares, claim_shares,
                         plot_critique_scores, plot_hit_rate, plot_page_regions, relevant_chunks,
                         short_label, LABEL_COLOURS, chunk_labels, min_text_px, MIN_FONT_PX, model_label)
from ragnb.core.samples import sample_path
from ragnb.check.metrics import flat_metrics

DATA = sample_path()
OUTPUTS = sample_path('ragchecker', 'examples', 'checking_outputs.json')


@pytest.fixture
def rc(): return json.loads(OUTPUTS.read_text())


def _cell_colours(fig):
    "Colours of the label cells of every axes (one image pixel per cell), as hex."
    return [matplotlib.colors.to_hex(px) for ax in fig.axes for im in ax.images
            for px in np.asarray(im.get_array()).reshape(-1, 3)]


def test_entailment_map_has_one_cell_per_label(rc):
    r = rc['results'][0]
    fig = plot_entailment_map(r)
    n = len(r['retrieved_context'])
    expected = (len(r['response_claims']) + len(r['gt_answer_claims'])) * (n + 1)
    cols = _cell_colours(fig)
    assert len(cols) == expected
    # the number of contradiction cells equals the number of Contradiction labels in the four lists
    n_c = sum(l == 'Contradiction' for f in ('answer2response', 'response2answer') for l in r[f])
    n_c += sum(l == 'Contradiction' for f in ('retrieved2response', 'retrieved2answer') for row in r[f] for l in row)
    assert cols.count(LABEL_COLOURS['Contradiction'].lower()) == n_c
    # relevant chunks are starred on the x axis
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert [t.endswith('\u2605') for t in ticks] == relevant_chunks(r)


def test_entailment_map_key_mode_uses_ids(rc):
    fig = plot_entailment_map(rc['results'][1], key=True)
    ylabels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ylabels == [f'R{i+1}' for i in range(len(rc['results'][1]['response_claims']))]
    key_text = ' '.join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert 'G8' in key_text and 'radiant future' in key_text


def test_entailment_map_errors_name_result_and_field(rc):
    r = copy.deepcopy(rc['results'][0])
    r['retrieved2answer'][3] = r['retrieved2answer'][3][:-1]
    with pytest.raises(ValueError, match=r"result '0': 'retrieved2answer' row 3 has 3 labels, expected 4"):
        plot_entailment_map(r)
    r = copy.deepcopy(rc['results'][0])
    del r['response2answer']
    with pytest.raises(KeyError, match='response2answer'):
        plot_entailment_map(r)


def test_missing_label_is_drawn_not_dropped(rc):
    r = copy.deepcopy(rc['results'][1])
    r['answer2response'][0] = None
    fig = plot_entailment_map(r)
    assert any(t.get_text() == '?' for ax in fig.axes for t in ax.texts)


def test_short_label_cuts_with_ellipsis():
    s = short_label('word ' * 40, width=20, max_lines=2)
    assert s.count('\n') == 1 and s.endswith('\u2026') and all(len(l) <= 20 for l in s.split('\n'))


@pytest.mark.parametrize('ext', ['png', 'svg', 'pdf'])
def test_save_figure_writes_the_format(rc, tmp_path, ext):
    p = save_figure(plot_metrics(rc['metrics']), tmp_path / 'sub' / f'm.{ext}')
    head = p.read_bytes()[:8]
    assert {'png': head.startswith(b'\x89PNG'), 'pdf': head.startswith(b'%PDF'), 'svg': b'<svg' in p.read_bytes()[:2000]}[ext]


def test_save_figure_rejects_unknown_extension(tmp_path):
    fig = plot_hit_rate(pd.DataFrame({'k': [1, 2], 'hit_rate': [.5, 1.]}))
    with pytest.raises(ValueError, match=r"m\.gif.*extension"):
        save_figure(fig, tmp_path / 'm.gif')


def test_metrics_plot_reads_both_scales(rc):
    assert flat_metrics(rc['metrics'])['claim_recall'] == 61.4
    assert flat_metrics(rc['results'][0]['metrics'])['context_precision'] == pytest.approx(75.0)
    fig = plot_metrics(rc['metrics'], per_result=[r['metrics'] for r in rc['results']])
    widths = sorted(round(p.get_width(), 1) for p in fig.axes[0].patches)
    assert widths == sorted(flat_metrics(rc['metrics']).values())
    with pytest.raises(KeyError, match='faithfulness'):
        plot_metrics({k: v for k, v in rc['results'][0]['metrics'].items() if k != 'faithfulness'})
    from ragnb.check.metrics import score
    fig = plot_metrics(score(rc['results']))  # a Scores object: its overall bars and one dot per result per metric
    assert sorted(round(p.get_width(), 1) for p in fig.axes[0].patches) == widths
    assert [len(c.get_offsets()) for c in fig.axes[0].collections] == [2] * 11


def test_claim_shares_sum_to_one_and_catch_bad_rows(rc):
    df = claim_shares({r['query_id']: r['metrics'] for r in rc['results']})
    assert np.allclose(df.sum(axis=1), 1)
    assert list(df.columns) == ['correct', 'relevant noise', 'irrelevant noise', 'hallucination']
    bad = {'sys-b': dict(rc['results'][0]['metrics'], precision=0.2)}
    with pytest.raises(ValueError, match="'sys-b' sum to"):
        plot_claim_shares(bad)
    # a result without response claims has all four at zero: allowed, drawn as such
    empty = {k: 0.0 for k in rc['results'][0]['metrics']}
    fig = plot_claim_shares({'empty': empty, 'q0': rc['results'][0]['metrics']})
    assert any('no response claims' in t.get_text() for t in fig.axes[0].texts)


def test_systems_plot_one_bar_per_system_and_metric():
    t = pd.DataFrame({'precision': [50., 60.], 'recall': [40., 45.], 'f1': [44., 51.]}, index=['bm25', 'e5'])
    fig = plot_systems(t, metrics=['precision', 'f1'])
    assert sorted(p.get_height() for p in fig.axes[0].patches) == [44., 50., 51., 60.]
    with pytest.raises(KeyError, match='mrr'):
        plot_systems(t, metrics=['mrr'])


def test_critique_scores_count_kept_dropped_and_failed():
    df = pd.DataFrame({'groundedness_score': [5, 4, None, 2], 'relevance_score': [4, 2, 3, 5],
                       'standalone_score': [3, 1, 4, 5], 'kept': [True, False, False, False]})
    fig = plot_critique_scores(df)
    g = fig.axes[0]
    heights = {}
    for p in g.patches:
        x = round(p.get_x() + p.get_width() / 2)
        heights[x] = heights.get(x, 0) + p.get_height()
    assert heights == {0: 0, 1: 1, 2: 0, 3: 1, 4: 1, 5: 1}  # scores 2, 4, 5 and one failed
    assert [p.get_height() for p in fig.axes[3].patches] == [1, 3]
    # a row whose generation failed has no question: counted apart, not as a dropped question with failed scores
    gen_failed = pd.concat([df, pd.DataFrame({'question': [None], 'kept': [False]})], ignore_index=True)
    gen_failed['question'] = gen_failed['question'].astype(object)
    gen_failed.loc[:3, 'question'] = 'q'
    fig = plot_critique_scores(gen_failed)
    assert [p.get_height() for p in fig.axes[3].patches] == [1, 3, 1]
    assert [t.get_text() for t in fig.axes[3].get_xticklabels()] == ['kept', 'dropped', 'no question']
    with pytest.raises(KeyError, match='kept'):
        plot_critique_scores(df.drop(columns='kept'))


def test_hit_rate_plot_lines_follow_table():
    t = pd.DataFrame({'k': [1, 3, 5], 'hit_rate': [.2, .5, .7], 'mrr': [.2, .3, .35]})
    fig = plot_hit_rate(t)
    lines = fig.axes[0].get_lines()
    assert [list(l.get_ydata()) for l in lines] == [[.2, .5, .7], [.2, .3, .35]]
    with pytest.raises(ValueError, match='empty'):
        plot_hit_rate(t.iloc[:0])


def test_page_regions_scaled_to_image():
    img = np.full((200, 100, 3), 255, dtype=np.uint8)  # a page of 50 x 100 points at zoom 2
    fig = plot_page_regions(img, [{'bbox': [10, 20, 30, 60], 'index': 1}], page_size=(50, 100))
    (r,) = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert (r.get_x(), r.get_y(), r.get_width(), r.get_height()) == (20, 40, 40, 80)
    with pytest.raises(ValueError, match="region 0 has no 4-number 'bbox'"):
        plot_page_regions(img, [{'box': [1, 2, 3, 4]}])


def _all_figures(rc, model=None):
    "One figure of every kind that shows a model's output, drawn from RAGChecker's example file."
    from ragnb.check.metrics import score
    crit = pd.DataFrame({'groundedness_score': [5, 2], 'relevance_score': [4, 4], 'standalone_score': [3, 5], 'kept': [True, False]})
    return {'map': plot_entailment_map(rc['results'][0], model=model),
            'map_key': plot_entailment_map(rc['results'][1], key=True, model=model),
            'map_widget': plot_entailment_map(rc['results'][1], key=True, show_key=False, model=model),
            'metrics': plot_metrics(score(rc['results']), model=model),
            'shares': plot_claim_shares({r['query_id']: r['metrics'] for r in rc['results']}, model=model),
            'systems': plot_systems(pd.DataFrame({'precision': [50., 60.], 'f1': [44., 51.]}, index=['bm25', 'e5']), model=model),
            'critique': plot_critique_scores(crit, model=model),
            'hit_rate': plot_hit_rate(pd.DataFrame({'k': [1, 3], 'hit_rate': [.5, .7], 'recall': [.5, .7]}), model=model)}


def test_figures_draw_themselves_as_png_without_the_inline_backend(rc):
    "Under Agg no inline formatter is registered: the figure itself must give IPython a PNG, not '<Figure size ...>'."
    from IPython.core.formatters import DisplayFormatter
    fmt = DisplayFormatter()  # a fresh formatter: no matplotlib printer registered, as in a kernel with MPLBACKEND=Agg
    assert matplotlib.get_backend().lower() == 'agg'
    for name, fig in _all_figures(rc).items():
        data, _ = fmt.format(fig)
        assert data.get('image/png', b'')[:4] == b'\x89PNG', name


def test_no_text_under_ten_pixels(rc):
    for name, fig in _all_figures(rc).items():
        assert min_text_px(fig) >= MIN_FONT_PX >= 10, (name, min_text_px(fig))


def test_the_model_is_named_in_every_title(rc):
    for name, fig in _all_figures(rc, model='scripted-test-model').items():
        titles = ' '.join(' '.join(t.get_text() for t in fig.findobj(matplotlib.text.Text)).split())
        assert 'scripted (scripted-test-model)' in titles, name
    assert model_label(None) is None and model_label('gpt-4o') == 'gpt-4o'
    # a generated dataset names its critic: the figure finds it without being told
    df = pd.DataFrame({'groundedness_score': [5], 'relevance_score': [4], 'standalone_score': [3], 'kept': [True],
                       'critic_model': ['gpt-4o-mini']})
    assert 'model: gpt-4o-mini' in plot_critique_scores(df)._suptitle.get_text()


def test_equal_lines_stay_distinguishable():
    t = pd.DataFrame({'k': [1, 3, 5], 'hit_rate': [.2, .5, .7], 'recall': [.2, .5, .7], 'mrr': [.2, .3, .35]})
    hit, recall, mrr = plot_hit_rate(t).axes[0].get_lines()
    assert list(recall.get_ydata()) == list(hit.get_ydata())  # the data are not moved
    assert recall.get_label() == 'recall (= hit rate)' and recall.get_linestyle() == '--'
    assert recall.get_markerfacecolor() == 'none' and recall.get_markersize() > hit.get_markersize()
    assert mrr.get_label() == 'mrr' and mrr.get_linestyle() == '-'


def test_chunks_are_numbered_from_one_with_their_ids_in_a_key(rc):
    r = rc['results'][0]
    assert chunk_labels(r) == ['c1', 'c2', 'c3', 'c4']
    fig = plot_entailment_map(r)
    assert [t.get_text().split()[0] for t in fig.axes[0].get_xticklabels()] == ['c1', 'c2', 'c3', 'c4']
    assert any('c1\u00a0=\u00a0000' in t.get_text() for t in fig.texts)


def test_svg_and_pdf_keep_text_as_text(rc, tmp_path):
    import pymupdf
    fig = plot_metrics(rc['metrics'])
    svg = save_figure(fig, tmp_path / 'm.svg').read_text()
    assert '<text' in svg and 'faithfulness' in svg
    assert 'faithfulness' in pymupdf.open(save_figure(fig, tmp_path / 'm.pdf'))[0].get_text()
