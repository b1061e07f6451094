"Engines (ragnb.core.engine): the CPU-heavy stages on local processes and on a local 2-CPU Ray give the local engine's output."
import io, json, sys
from contextlib import redirect_stdout
from pathlib import Path
import pandas as pd
import pytest
from ragnb.core.engine import map_items, ray_init
from ragnb.docs.pdf import pdf_regions, regions_many, find_regions, parse_pdf
from ragnb.docs.pages import DocumentError
from ragnb.docs.documents import load_folder, split_documents, split_many
from ragnb.check.metrics import score, score_many, load_results
from ragnb.core.llm import LLM, Pacing
from ragnb.core.cache import CallCache
from ragnb.testing.scripted import ScriptedServer
from ragnb.core.samples import sample_path
from ragnb.app.cli import main

EU = sample_path('documents', 'camelot', 'tests', 'files', 'tabula', 'icdar2013-dataset', 'competition-dataset-eu')
PDFS = [EU/'eu-004.pdf', EU/'eu-001.pdf']

@pytest.fixture(scope='module')
def ray_local():
    "A local Ray with 2 CPUs for this module's Ray tests; each skips by itself when Ray is not installed."
    ray = pytest.importorskip('ray')
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test file
    yield ray_init(2)
    ray.shutdown()

def pages_of(doc):
    return [(p.page, p.markdown, p.tables, {k: Path(v).name for k, v in p.images.items()}, p.warnings) for p in doc.pages]

def _words(text): return len(text.split())

def test_map_items_keeps_order_and_raises_the_item_error():
    xs = [f'{"w " * i}' for i in range(30)]
    assert map_items(_words, xs, workers=2) == list(range(30))
    with pytest.raises(ValueError, match="'x'"): map_items(int, ['1', 'x', '3'], workers=2)
    with pytest.raises(ValueError, match='engine must be one of'): map_items(int, ['1'], engine='dask')

def test_regions_on_local_workers_equal_one_process():
    many = regions_many(PDFS, workers=2)
    assert [many[str(p)] for p in PDFS] == [pdf_regions(p) for p in PDFS]
    assert find_regions(PDFS[0], [2, 3], workers=2) == pdf_regions(PDFS[0], [2, 3])
    with pytest.raises(DocumentError, match='no page 99'): regions_many(PDFS[0], [99], workers=2)

def test_offline_parse_on_local_workers_equals_one_process(tmp_path):
    one = parse_pdf(PDFS[0], tmp_path/'one', offline=True, page_zoom=0.5, crop_zoom=0.5)
    two = parse_pdf(PDFS[0], tmp_path/'two', offline=True, page_zoom=0.5, crop_zoom=0.5, workers=2)
    assert pages_of(two) == pages_of(one) and sum(len(p.tables) for p in one.pages) >= 2
    assert sorted(f.name for f in (tmp_path/'two').iterdir()) == sorted(f.name for f in (tmp_path/'one').iterdir())
    for f in (tmp_path/'one').glob('*.md'): assert (tmp_path/'two'/f.name).read_text() == f.read_text()

def test_split_and_metrics_on_local_workers():
    docs = load_folder(sample_path('openai-cookbook'))
    assert split_many(docs, 800, 80, workers=2) == split_documents(docs, 800, 80)
    import dataclasses
    base = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))
    rs = [dataclasses.replace(r, query_id=f'{r.query_id}-{i}') for i in range(40) for r in base]  # ids must be unique
    pd.testing.assert_frame_equal(score_many(rs, workers=2, block=9).per_result, score(rs).per_result)

def test_cli_regions_and_metrics_with_workers():
    def run(*argv):
        buf = io.StringIO()
        with redirect_stdout(buf): assert main(list(argv)) == 0
        return buf.getvalue()
    assert run('regions', str(PDFS[0]), '--json', '--workers', '2') == run('regions', str(PDFS[0]), '--json')
    f = str(sample_path('ragchecker', 'examples', 'checking_outputs.json'))
    assert run('metrics', f, '--workers', '2') == run('metrics', f)

# --- on a local Ray with 2 CPUs

def test_ray_regions_offline_parse_split_and_metrics(ray_local, tmp_path):
    many = regions_many(PDFS, engine='ray', workers=2)
    assert [many[str(p)] for p in PDFS] == [pdf_regions(p) for p in PDFS]
    one = parse_pdf(PDFS[0], tmp_path/'one', offline=True, page_zoom=0.5, crop_zoom=0.5)
    ray = parse_pdf(PDFS[0], tmp_path/'ray', offline=True, page_zoom=0.5, crop_zoom=0.5, engine='ray', workers=2)
    assert pages_of(ray) == pages_of(one)
    docs = load_folder(sample_path('openai-cookbook'))
    assert split_many(docs, 800, 80, engine='ray', workers=2) == split_documents(docs, 800, 80)
    import dataclasses
    base = load_results(sample_path('ragchecker', 'examples', 'checking_outputs.json'))
    rs = [dataclasses.replace(r, query_id=f'{r.query_id}-{i}') for i in range(40) for r in base]  # ids must be unique
    pd.testing.assert_frame_equal(score_many(rs, engine='ray', workers=2, block=9).per_result, score(rs).per_result)

def test_ray_errors_name_the_item(ray_local):
    with pytest.raises(ValueError, match="'x'"): map_items(int, ['1', 'x'], 'ray', 2)

def test_ray_vision_parse_calls_stay_in_one_llm(ray_local, tmp_path):
    "Regions on Ray, model calls from this process through one LLM: its concurrency bounds the whole run."
    with ScriptedServer(latency=0.05) as srv:
        def llm(name): return LLM(base_url=srv.base_url, api_key='t', model='scripted-test-model', pacing=Pacing(concurrency=2),
                                  cache_path=tmp_path/name/'c.sqlite', progress=False)
        ray = parse_pdf(PDFS[0], tmp_path/'ray', llm('r'), page_zoom=0.5, crop_zoom=0.5, engine='ray', workers=2)
        assert srv.max_inflight <= 2
        local = parse_pdf(PDFS[0], tmp_path/'local', llm('l'), page_zoom=0.5, crop_zoom=0.5)
    assert pages_of(ray) == pages_of(local) and not ray.failures

def _put(item):
    path, i = item
    c = CallCache(path)
    for j in range(20): c.put(f'{i}-{j}', {'text': 'x'})
    return i

def test_call_cache_from_ray_workers(ray_local, tmp_path):
    assert map_items(_put, [(str(tmp_path/'c.sqlite'), i) for i in range(6)], 'ray', 2) == list(range(6))
    assert len(CallCache(tmp_path/'c.sqlite')) == 120

def test_cli_parse_with_ray(ray_local, tmp_path):
    assert main(['parse', str(PDFS[0]), '--out', str(tmp_path/'r'), '--offline', '--engine', 'ray', '--workers', '2', '--pages', '2,3']) == 0
    assert main(['parse', str(PDFS[0]), '--out', str(tmp_path/'l'), '--offline', '--pages', '2,3']) == 0
    assert json.loads((tmp_path/'r'/'manifest.json').read_text())['pages'] == json.loads((tmp_path/'l'/'manifest.json').read_text())['pages']
