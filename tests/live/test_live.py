"ragnb's stages against a real endpoint: claims and labels on RAGChecker's example, generation on small documents, one PDF page."
import collections, os, time
import pytest
from ragnb.check.metrics import LABEL_FIELDS, LABELS, load_results
from ragnb.check.checker import run_checks
from ragnb.synth.generate import generate_dataset
from ragnb.docs.documents import load_documents
from ragnb.core.llm import LLM


def usage_figures(llm:LLM, seconds:float) -> dict:
    u = llm.usage
    return dict(calls=u.calls, cached=u.cached, failed_calls=u.failed, prompt_tokens=u.prompt_tokens,
                completion_tokens=u.completion_tokens, seconds=round(seconds, 1),
                completion_tokens_per_s=round(u.completion_tokens / seconds, 2) if seconds and u.calls else None,
                seconds_per_call=round(seconds / u.calls, 1) if u.calls else None,
                structured=[(f['feature'].split(':')[1], f['status']) for f in llm.features()])


def test_check_ragchecker_example_keeps_both_results(live_llm, shared, record):
    llm = live_llm()
    t0 = time.perf_counter()
    run = run_checks(load_results(shared/'ragchecker/examples/checking_inputs.json'), llm)
    secs = time.perf_counter() - t0
    fails = collections.Counter(f['reason'].split(':')[0] if f['stage'] == 'extract' else 'unlabelled'
                                for r in run.results for f in r.ragnb.get('failures', []))
    warns = collections.Counter(w['kind'] for r in run.results for w in r.ragnb.get('warnings', []))
    record('check', **usage_figures(llm, secs), failures_by_kind=dict(fails), warnings_by_kind=dict(warns),
           claims={r.query_id: (len(r.response_claims or []), len(r.gt_answer_claims or [])) for r in run.results},
           claims_dropped=sum(1 for r in run.results for w in r.ragnb.get('warnings', []) if w['kind'] == 'dropped_claim'),
           claims_salvaged=sum(len(getattr(r, f) or []) for r in run.results for f in ('response_claims', 'gt_answer_claims')
                               if any(w['field'] == f and w['kind'] == 'dropped_claim' for w in r.ragnb.get('warnings', []))),
           scored=list(run.scores.per_result.index), excluded={q: list(x) for q, x in run.scores.per_result.excluded.items() if x},
           overall=run.scores.overall)
    for r in run.results:   # both results keep all four label sets, with a label for every claim (and chunk)
        assert all(getattr(r, f) is not None for f in LABEL_FIELDS), (r.query_id, r.ragnb.get('failures'))
        assert len(r.answer2response) == len(r.response_claims) and len(r.response2answer) == len(r.gt_answer_claims)
        assert all(len(row) == len(r.retrieved_context) for row in r.retrieved2response + r.retrieved2answer)
        assert set(r.answer2response + r.response2answer) <= set(LABELS)
    assert list(run.scores.per_result.index) == ['0', '1']


@pytest.mark.parametrize('structured', [False, True], ids=['text-protocol', 'json-schema'])
def test_generate_small_documents_without_parse_failures(live_llm, shared, record, structured):
    docs = load_documents(*(shared/'openai-cookbook'/n for n in ('README.md', 'CONTRIBUTING.md', 'AGENTS.md')))
    llm = live_llm()
    t0 = time.perf_counter()
    ds = generate_dataset(docs, llm, chunk_size=1500, chunk_overlap=0, max_chunks=int(os.environ.get('RAGNB_LIVE_CHUNKS', 3)),
                          structured=structured)
    secs = time.perf_counter() - t0
    kinds = collections.Counter(f"{f['stage']}:{f['kind']}" for fs in ds.df.failures for f in fs)
    d = ds.df[ds.df.question.notna()]
    record(f'generate[{"json-schema" if structured else "text-protocol"}]', **usage_figures(llm, secs),
           failures_by_kind=dict(kinds), **ds.counts(), evidence_found=int(d.evidence_found.sum()),
           scores={c: d[f'{c}_score'].tolist() for c in ('groundedness', 'relevance', 'standalone')})
    assert ds.counts()['questions'] == len(ds) > 0
    assert not [k for k in kinds if k.endswith(':parse')], kinds


def test_parse_one_pdf_page_if_the_model_sees_images(live_llm, shared, record, tmp_path):
    import pymupdf
    from ragnb.core.calls import image_part, text_part
    from ragnb.docs.pdf import parse_pdf
    probe = pymupdf.open(); page = probe.new_page(width=300, height=120)
    page.insert_text((30, 70), 'ZEBRA 47', fontsize=36)
    png = page.get_pixmap(dpi=96).tobytes('png')
    llm = live_llm()
    r = llm.call([{'role': 'user', 'content': [image_part(png), text_part('What is written in this image? Reply with the text only.')]}],
                 item_id='vision probe', model=llm.vision_model)
    if not (r.ok and 'ZEBRA' in (r.text or '').upper()):
        record('pdf', vision=False, probe=(r.text or str(r.failure))[:120])
        pytest.skip(f"the model shows no vision (probe reply: {(r.text or str(r.failure))[:80]!r})")
    pdf = next((shared/'documents').rglob('*.pdf'))
    t0 = time.perf_counter()
    doc = parse_pdf(pdf, tmp_path/'parsed', llm, pages=[1])
    record('pdf', vision=True, file=pdf.name, **usage_figures(llm, time.perf_counter() - t0),
           failed_pages=[p.page for p in doc.pages if p.failure])
    assert not [p for p in doc.pages if p.failure] and doc.pages[0].markdown.strip()
