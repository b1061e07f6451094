"Issue 42, first step: `ragnb inspect` scores a test set itself; each measure flags a set built to fail it."
import json
import pandas as pd
import pytest
from ragnb.app.cli import main
from ragnb.rag.inspect import inspect_testset, near_duplicates

ASKS = ['Which river crosses Cairo?', 'How tall is Mount Kenya?', 'When was the Aswan dam finished?',
        'Who painted the Mona Lisa?', 'What metal melts at 1538 degrees?', 'Where do emperor penguins breed?',
        'How many moons does Mars have?', 'Which language is spoken in Quebec?', 'What causes ocean tides?',
        'Why is the sky blue at noon?', 'Which planet has the longest day?', 'How old is the Great Wall?']

def rows(**over):
    out = [dict(id=f'q{i}', question=q, answer='a', evidence=f'Passage {i} holds the fact the reader needs.',
                source_doc=f'doc{i % 3}.md', chunk_id=f'doc{i % 3}.md#{i}', context=f'Text {i} on subject {i * 7}.',
                kept=True, evidence_start=i * 100, evidence_end=i * 100 + 40, evidence_found=True,
                question_language='en', question_type='factoid') for i, q in enumerate(ASKS)]
    for i, r in enumerate(out):
        for k, f in over.items(): r[k] = f(i, r)
    return out

def write(path, rs):
    path.write_text(''.join(json.dumps(r) + '\n' for r in rs)); return path

def verdict(rep, measure): return rep.table().loc[measure, 'verdict']

def test_a_good_set_passes_and_each_bad_set_is_flagged():
    assert all(m.verdict in ('ok', 'n/a') for m in inspect_testset(rows(), languages=['en']).measures)
    dup = inspect_testset(rows(question=lambda i, r: ASKS[0] if i < 4 else r['question']))
    assert verdict(dup, 'near-duplicate questions') == 'check' and len(dup.duplicates) == 6   # 4 alike: 6 pairs
    copied = inspect_testset(rows(evidence=lambda i, r: r['question'] + ' That is what the text says.'))
    assert verdict(copied, 'questions copied from their evidence') == 'check'
    one_doc = inspect_testset(rows(kept=lambda i, r: r['source_doc'] == 'doc0.md'))
    assert verdict(one_doc, 'documents covered') == 'check'
    one_lang = inspect_testset(rows(), languages=['en', 'de'])
    assert verdict(one_lang, 'languages asked for and present') == 'check'
    same = inspect_testset(rows(evidence_start=lambda i, r: 0, evidence_end=lambda i, r: 40))
    assert verdict(same, 'questions sharing evidence') == 'check'
    easy = inspect_testset(rows(context=lambda i, r: r['question'] + ' ' + r['context']))
    assert verdict(easy, 'found first by keywords (BM25)') == 'check'

def test_a_measure_without_its_fields_says_so():
    rep = inspect_testset([{'question': q} for q in ASKS])
    t = rep.table()
    assert t.loc['documents covered', 'verdict'] == 'n/a' and 'no source_doc' in t.loc['documents covered', 'finding']
    assert t.loc['questions copied from their evidence', 'verdict'] == 'n/a'

def test_cli_reads_ragnb_and_ragchecker_sets_and_names_bad_rows(tmp_path, capsys):
    good = write(tmp_path/'qa.jsonl', rows())
    assert main(['inspect', str(good), '--languages', 'en,de', '--out', str(tmp_path/'r.json')]) == 0
    out = capsys.readouterr().out
    assert 'near-duplicate questions' in out and 'missing: de' in out
    assert json.loads((tmp_path/'r.json').read_text())['kept'] == 12
    assert main(['inspect', str(good), '--languages', 'en,de', '--strict']) == 1   # a 'check' verdict
    rc = tmp_path/'rc.json'
    rc.write_text(json.dumps({'results': [{'query_id': str(i), 'query': q, 'gt_answer': 'a'} for i, q in enumerate(ASKS)]}))
    assert main(['inspect', str(rc)]) == 0
    bad = write(tmp_path/'bad.jsonl', rows(question=lambda i, r: 7 if i == 3 else r['question']))
    capsys.readouterr()
    assert main(['inspect', str(bad), '--out', str(tmp_path/'no.json')]) == 1
    err = capsys.readouterr().err
    assert f'{bad} row 3' in err and "'question'" in err and not (tmp_path/'no.json').exists()

def test_near_duplicates_in_blocks_match_one_block():
    qs = ASKS * 3
    assert near_duplicates(qs, block=5) == near_duplicates(qs, block=1000)

def test_against_another_set_and_the_figure(tmp_path, capsys):
    a = write(tmp_path/'a.jsonl', rows())
    b = write(tmp_path/'b.jsonl', rows(evidence=lambda i, r: r['question'] + ' That is what the text says.'))
    assert main(['inspect', str(a), '--against', str(b), '--figure', str(tmp_path/'cov.png')]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith('questions copied from their evidence') and 'ok / check' in l)
    lo, hi = [float(x) for x in line.split()[-5:-3]]
    assert 0 < lo <= hi <= 1                                           # b copies more, beyond the interval
    assert (tmp_path/'cov.png').read_bytes()[:4] == b'\x89PNG'

def test_personas_styles_and_modality_against_what_was_asked(tmp_path, capsys):
    kinds = ['student', 'expert', 'teacher']
    even = inspect_testset(rows(persona=lambda i, r: kinds[i % 3]), asked={'persona': kinds})
    assert verdict(even, 'personas asked for and present') == 'ok' and verdict(even, 'personas balanced') == 'ok'
    starved = inspect_testset(rows(persona=lambda i, r: 'student' if i else 'expert'), asked={'persona': kinds})
    assert verdict(starved, 'personas asked for and present') == 'check'            # no teacher at all
    assert verdict(starved, 'personas balanced') == 'check'
    assert starved.table().loc['personas asked for and present', 'finding'] == 'missing: teacher'
    tables = inspect_testset(rows(evidence=lambda i, r: 'table_1' if i < 1 else r['evidence']),
                             asked={'modality': ['text', 'table']})
    assert verdict(tables, 'modalities asked for and present') == 'ok'
    assert verdict(tables, 'modalities balanced') == 'check'                          # 1 table question of 12
    nocol = inspect_testset(rows(), asked={'style': ['web_search']})
    assert verdict(nocol, 'styles asked for and present') == 'n/a'
    f = write(tmp_path/'set.jsonl', rows(persona=lambda i, r: 'student' if i else 'expert'))
    assert main(['inspect', str(f), '--personas', 'student,expert,teacher', '--strict']) == 1
    assert 'missing: teacher' in capsys.readouterr().out

def test_the_demo_report_has_the_test_set_section(tmp_path):
    from ragnb.app.demo import run_demo
    s = run_demo(tmp_path/'demo', mode='scripted', log=lambda m: None)
    names = [m['measure'] for m in s['testset']['measures']]
    assert 'documents covered' in names and 'near-duplicate questions' in names
    html = (tmp_path/'demo'/'report.html').read_text()
    assert '<h2>The test set itself</h2>' in html and 'testset_coverage.png' in html
    assert (tmp_path/'demo'/'testset_coverage.png').stat().st_size > 1000 and 'testset_coverage.png' in s['files']

def test_sections_covered_without_offsets_finds_the_evidence(tmp_path):
    from ragnb.docs.documents import load_documents
    (tmp_path/'d').mkdir()
    (tmp_path/'d'/'a.md').write_text('# Rivers\nThe Nile crosses Cairo on its way north.\n\n# Mountains\n'
                                     'Mount Kenya is 5,199 metres tall.\n\n# Deserts\nThe Sahara is hot.\n')
    docs = load_documents(tmp_path/'d')
    rs = [dict(id='q1', question='Which river crosses Cairo?', answer='The Nile', source_doc=docs[0].id,
               evidence='The Nile crosses Cairo'),
          dict(id='q2', question='How tall is Mount Kenya?', answer='5,199 m', source_doc=docs[0].id,
               evidence='Mount Kenya is 5,199 metres tall.')]
    rep = inspect_testset(rs, docs=docs)
    assert rep.table().loc['sections covered', 'finding'] == '2 of 3 sections have a kept question'
    assert [s for _, s in rep.uncovered] == ['Deserts']

def test_mix_and_quality_counts_are_shown(capsys):
    rs = rows(persona=lambda i, r: '<b>student</b>' if i % 2 else 'expert', groundedness_score=lambda i, r: 5 - i % 2,
              drop_reason=lambda i, r: None)
    rep = inspect_testset(rs)
    c = rep.counts()
    assert c['kept by persona'].loc['questions', 'expert'] == 6 and c['critique groundedness'].loc['questions', 5] == 6
    html = rep._repr_html_()
    assert 'kept by persona' in html and '&lt;b&gt;student&lt;/b&gt;' in html and '<b>student</b>' not in html
    assert 'critique groundedness' in str(rep)

def test_kept_as_text_is_refused_as_every_reader_refuses_it(tmp_path, capsys):
    "`kept: \"false\"` would count as kept; `inspect` refuses it with the row and field, as `read_dataset` does."
    from ragnb.synth.generate import read_dataset
    for text in ('false', 'no'):
        bad = write(tmp_path/f'{text}.jsonl', rows(kept=lambda i, r: text if i == 2 else True))
        assert main(['inspect', str(bad)]) == 1
        err = capsys.readouterr().err
        assert f"{bad} row 2: field 'kept' must be true or false, not {text!r}" in err, err
        with pytest.raises(ValueError, match="row 2: field 'kept'"): read_dataset(bad)

def test_pathological_sets_are_counted_not_enumerated():
    "3,000 copies of one question: every pair counted, 200 listed; a 1 MB question compared on its start, and said."
    many = pd.DataFrame(rows()[:1] * 3000).assign(id=[f'q{i}' for i in range(3000)],
                                                   evidence_start=0, evidence_end=40)
    rep = inspect_testset(many)
    t = rep.table()
    assert t.loc['near-duplicate questions', 'value'] == 1.0
    assert '4,498,500 pair(s)' in t.loc['near-duplicate questions', 'finding'] and '200 listed' in t.loc[
        'near-duplicate questions', 'finding']
    assert len(rep.duplicates) == 200 and len(rep.same_evidence) <= 200
    assert '4,498,500 pair(s) on overlapping evidence' in t.loc['questions sharing evidence', 'finding']
    huge = pd.DataFrame(rows()).assign(question=lambda d: [q if i else q + ' x' * 500_000 for i, q in enumerate(d.question)])
    f = inspect_testset(huge).table().loc['near-duplicate questions', 'finding']
    assert '1 question(s) compared on their first 2,000 characters' in f, f

def test_coverage_figure_draws_dollar_signs_and_long_names_as_written(tmp_path):
    "Hostile round 4, item 17: '$' in a document name is text, not math; a long name keeps its start and its end."
    from ragnb.view.plots import save_figure
    names = ['Pricing $10 to $20.md', 'fees $%$ 2024.md', 'how_to_work_with_large_language_models_v2.md']
    rep = inspect_testset(pd.DataFrame(rows(source_doc=lambda i, r: names[i % 3])))
    fig = rep.plot()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert r'Pricing \$10 to \$20.md' in labels and r'fees \$%\$ 2024.md' in labels, labels
    assert any(l.startswith('how_to_work') and l.endswith('_v2.md') and '\u2026' in l for l in labels), labels
    assert all(float(t) == int(float(t)) for t in fig.axes[0].get_xticks())   # questions are counted whole
    out = save_figure(fig, tmp_path/'coverage.png')
    assert out.stat().st_size > 1000


def test_duplicate_pairs_counts_as_comparing_every_pair():
    "Grouping and block-wise counting give the pairs that comparing every two questions gives, whatever the block."
    import itertools, random
    from rapidfuzz import fuzz, utils
    from ragnb.rag.inspect import duplicate_pairs
    rng = random.Random(1)
    words = 'how do i stream a reply from the chat api token key model'.split()
    for t in range(30):
        qs = [' '.join(rng.choices(words, k=rng.randint(3, 6))) for _ in range(rng.randint(2, 80))]
        qs += rng.choices(qs, k=10)   # exact repeats too
        norm = [' '.join(sorted(utils.default_process(q).split())) for q in qs]
        every = {(i, j) for i, j in itertools.combinations(range(len(qs)), 2) if fuzz.ratio(norm[i], norm[j]) >= 90}
        p = duplicate_pairs(qs, block=rng.choice([1, 3, 500]), max_pairs=20)
        assert p.total == len(every) and p.members == {x for pr in every for x in pr}, t
        assert len(p.shown) == min(20, len(every)) and all((i, j) in every for i, j, _ in p.shown), t


ANSWERS = {'Which river crosses Cairo?': 'the Nile', 'Who painted the Mona Lisa?': 'Leonardo da Vinci',
           'How many moons does Mars have?': 'two moons', 'Which language is spoken in Quebec?': 'French',
           'How tall is Mount Kenya?': '5,199 metres'}

def test_closed_book_counts_questions_a_model_answers_without_the_passage(tmp_path, monkeypatch, capsys):
    "Issue 51: `ragnb inspect --model` asks each kept question alone; the estimate comes first; failures apart."
    from ragnb.testing.scripted import ScriptedServer
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    ds = write(tmp_path/'qa.jsonl', rows(answer=lambda i, r: ANSWERS.get(r['question'], f'fact {i}')))
    def knows(call, rng):   # a model that knows four of the twelve answers, says "I don't know" to the rest, and
        q = call.inputs['question']   # gets Mount Kenya wrong
        if q == 'How tall is Mount Kenya?': return 'About 3,000 metres'
        if q == 'What causes ocean tides?': raise RuntimeError('scripted failure')
        return {'the Nile': 'The Nile.', 'Leonardo da Vinci': 'Leonardo da Vinci', 'two moons': 'Mars has two moons',
                'French': 'French'}.get(ANSWERS.get(q), "I don't know.")
    with ScriptedServer(rules={'closed_book_answer': knows}) as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        assert main(['inspect', str(ds), '--model', 'scripted-test-model', '--dry-run']) == 0
        err = capsys.readouterr().err
        assert 'would send: closed-book check: 12 calls to scripted-test-model (0 in the call cache)' in err, err
        assert not srv.calls('closed_book_answer') and not (tmp_path/'cache').exists()   # a dry run calls nothing
        assert main(['inspect', str(ds), '--model', 'scripted-test-model', '--out', str(tmp_path/'r.json'),
                     '--max-retries', '0']) == 0
        out, err = capsys.readouterr()
    assert 'will send: closed-book check: 12 calls' in err
    m = {r['measure']: r for r in json.loads((tmp_path/'r.json').read_text())['measures']}
    cb = m['answerable without the passage']
    assert cb['value'] == round(4 / 11, 3) and cb['verdict'] == 'check', cb   # 4 of the 11 that got a reply
    assert '4 of 11 answered by scripted-test-model' in cb['finding'] and '1 call(s) failed' in cb['finding'], cb
    per = {r['id']: r for r in json.loads((tmp_path/'r.json').read_text())['closed_book']}
    assert len(per) == 12 and sum(r['closed_book'] is True for r in per.values()) == 4
    assert 'scripted failure' in [r['closed_book_failure'] for r in per.values() if r['closed_book_failure']][0]
    assert 'answered without the passage (first 10):' in out and 'Leonardo da Vinci' in out


def test_answer_f1_normalises_as_squad_does():
    from ragnb.rag.inspect import answer_f1
    assert answer_f1('The Nile.', 'the Nile') == 1.0 and abs(answer_f1('Mars has two moons', 'two moons') - 2 / 3) < 1e-9
    assert answer_f1("I don't know", 'French') == 0.0 and answer_f1('', 'x') == 0.0
