"""Issue 51: an estimate before every command that calls a model (calls, tokens, price, time), and `--dry-run`
stopping there with nothing written, the call cache's folder byte for byte as it was."""
import re
from pathlib import Path

from ragnb.app.cli import main
from ragnb.app.demo import sample_docs

GUIDE = sample_docs()/'what_makes_documentation_good.md'


def _state(folder:Path) -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()} if folder.exists() else None


def test_generate_says_what_it_will_send_and_a_dry_run_writes_nothing(tmp_path, monkeypatch, capsys):
    from ragnb.testing.scripted import ScriptedServer
    cache = tmp_path/'cache'
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(cache))
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL'): monkeypatch.delenv(v, raising=False)
    out = tmp_path/'qa.jsonl'
    # no endpoint and no cache yet: the dry run still says what a run would send, at gpt-4o-mini's prices
    assert main(['generate', str(GUIDE), '--out', str(out), '--max-chunks', '3', '--dry-run']) == 0
    err = capsys.readouterr().err
    assert 'would send about 12 model calls (3 writing questions, 0 of them in the call cache; 9 critiques)' in err, err
    assert re.search(r"price: about \$\d+\.\d+ at gpt-4o-mini's prices \(--batch: about \$", err), err
    assert 'time: no estimate yet (no earlier call of factoid_qa@' in err, err
    assert not out.exists() and not cache.exists()   # nothing written, not even the cache folder
    with ScriptedServer() as srv:   # a real run, then the same dry run: its questions are cached, its pace known
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        args = ['generate', str(GUIDE), '--out', str(out), '--max-chunks', '3', '--model', 'scripted-test-model',
                '--critique-profile', 'default']
        assert main(args) == 0
        err = capsys.readouterr().err
        assert 'will send about 12 model calls (3 writing questions, 0 of them in the call cache' in err, err
        assert "price: none (scripted-test-model is free in ragnb's table)" in err, err
        out.unlink()
        import gc; gc.collect()   # the run's own connection closes now, as it does when a command ends
        before = _state(cache)
        assert main(args + ['--dry-run']) == 0
        err = capsys.readouterr().err
    assert 'would send about 12 model calls (3 writing questions, 3 of them in the call cache' in err, err
    assert re.search(r'time: about \d+ s, at the pace of \d+ earlier calls of these prompts', err), err
    assert not out.exists() and _state(cache) == before   # the cache folder byte for byte as it was


def test_generate_with_question_types_says_each_stage_first_and_a_dry_run_writes_nothing(tmp_path, monkeypatch,
                                                                                         capsys):
    from ragnb.testing.scripted import ScriptedServer
    cache, out = tmp_path/'cache', tmp_path/'qa.jsonl'
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(cache))
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL'): monkeypatch.delenv(v, raising=False)
    mix = ['generate', str(sample_docs()), '--out', str(out), '--question-types', 'factoid,multi_hop,reasoning',
           '--max-chunks', '3', '--chunk-size', '1000', '--chunk-overlap', '100', '--personas', 'Dev: builds apps']
    assert main(mix + ['--dry-run']) == 0   # no endpoint and no cache yet: each stage, at gpt-4o-mini's prices
    err = capsys.readouterr().err
    m = re.search(r'would send about (\d+) model calls \((\d+) entity calls; 1 factoid question; 2 other questions; '
                  r'9 critiques; (\d) single-hop checks; 0 of them in the call cache\)', err)
    assert m and int(m[1]) == int(m[2]) + 1 + 2 + 9 + int(m[3]) and int(m[3]) in (2, 3), err
    assert re.search(r'and embeddings of \d+ passages to link \(~[\d,]+ tokens, text-embedding-3-small: under \$0\.0001\)', err), err
    assert re.search(r"price: about \$\d+\.\d+ at gpt-4o-mini's prices \(--batch: about \$", err), err
    assert 'persona call' not in err   # --personas given: none proposed
    assert not out.exists() and not cache.exists()   # nothing written, not even the cache folder
    with ScriptedServer() as srv:   # a real run, then the same dry run: the calls it made are cached, its pace known
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        args = mix + ['--model', 'scripted-test-model', '--critique-profile', 'default', '--keep-all']
        assert main(args) == 0
        err = capsys.readouterr().err
        assert 'will send about' in err and "price: none (scripted-test-model is free in ragnb's table)" in err, err
        assert err.index('will send about') < err.index('price: none') < err.index('entities')   # before any call
        out.unlink(missing_ok=True)
        import gc; gc.collect()   # the run's own connection closes now, as it does when a command ends
        before, calls = _state(cache), len(srv.requests)
        assert main(args + ['--dry-run']) == 0
        assert len(srv.requests) == calls   # no call
        err = capsys.readouterr().err
    m = re.search(r'would send about \d+ model calls \((\d+) entity calls;.*; (\d+) of them in the call cache\)', err)
    assert m and int(m[2]) >= int(m[1]) + 1, err   # the entities and the factoid at least, asked the same way again
    assert not out.exists() and _state(cache) == before   # the cache folder byte for byte as it was


def _tree(folder:Path) -> dict|None:
    return ({str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob('*')
             if p.is_file()} if folder.exists() else None)


def test_parse_says_its_vision_calls_first_and_a_dry_run_writes_nothing(tmp_path, monkeypatch, capsys):
    import pymupdf
    from ragnb.core.samples import sample_path
    from ragnb.testing.scripted import ScriptedServer
    pdf = sample_path('documents', 'icdar2013', 'us', 'us-033.pdf')
    n = pymupdf.open(pdf).page_count
    cache, out = tmp_path/'cache', tmp_path/'parsed'
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(cache))
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL', 'RAGNB_VISION_MODEL'): monkeypatch.delenv(v, raising=False)
    # no endpoint: a dry run still draws the pages and says what a vision parse would send, at gpt-4o-mini's prices
    assert main(['parse', str(pdf), '--out', str(out), '--dry-run']) == 0
    err = capsys.readouterr().err
    assert f'would send {n} vision calls to gpt-4o-mini, one a page (0 of them in the call cache)' in err, err
    assert re.search(r"price: about \$\d+\.\d+ at gpt-4o-mini's prices \(--batch: about \$", err), err
    assert 'time: no estimate yet (no earlier call of pdf_page@' in err, err
    assert not out.exists() and not cache.exists()   # no page image, no region, not even the cache folder
    with ScriptedServer() as srv:   # a real parse, then the same dry run: every page cached, the pace known
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        args = ['parse', str(pdf), '--out', str(out), '--model', 'scripted-test-model']
        assert main(args) == 0
        err = capsys.readouterr().err
        assert f'will send {n} vision calls to scripted-test-model, one a page (0 of them in the call cache)' in err
        assert "price: none (scripted-test-model is free in ragnb's table)" in err, err
        assert err.index('will send') < err.index('price: none')
        import gc; gc.collect()   # the run's own connection closes now, as it does when a command ends
        before, parsed = _tree(cache), _tree(out)
        calls = len(srv.requests)
        assert main(args + ['--dry-run']) == 0
        assert len(srv.requests) == calls   # no call
    err = capsys.readouterr().err
    assert f'would send {n} vision calls to scripted-test-model, one a page ({n} of them in the call cache)' in err
    assert 'time: none: every call is in the call cache' in err, err
    assert _tree(cache) == before and _tree(out) == parsed   # both folders byte for byte as they were


def test_run_says_its_questions_and_time_first_and_a_dry_run_asks_none(tmp_path, monkeypatch, capsys):
    import json
    (tmp_path/'rag_run_est.py').write_text('from pathlib import Path\n'
                                   'def answer(q):\n'
                                   '    Path("asked.txt").open("a").write(q + "\\n")\n'
                                   '    return "Hubble launched in 1990.", ["Hubble launched in 1990."]\n')
    (tmp_path/'qs.jsonl').write_text(''.join(json.dumps(dict(id=f'q{i}', question=f'question {i}?',
                                                             answer='1990')) + '\n' for i in range(3)))
    monkeypatch.chdir(tmp_path)
    args = ['run', 'qs.jsonl', '--system', 'rag_run_est:answer', '--out', 'answers.json', '--limit', '2']
    assert main(args + ['--dry-run']) == 0
    err = capsys.readouterr().err
    assert 'would ask 2 questions (the first 2 of 3) of answer, 4 at a time' in err, err
    assert "model calls and price: the system's own; ragnb sends none in `run`" in err, err
    assert 'time: no estimate yet (no earlier run to learn its pace from)' in err, err
    assert not (tmp_path/'asked.txt').exists() and not (tmp_path/'answers.json').exists()   # nothing asked or written
    assert main(args) == 0
    err = capsys.readouterr().err
    assert 'will ask 2 questions (the first 2 of 3) of answer' in err and err.index('will ask') < err.index('time:')
    assert (tmp_path/'asked.txt').read_text().count('\n') == 2
    before = (tmp_path/'answers.json').read_bytes()
    assert main(args[:-1] + ['3', '--dry-run']) == 0   # all three now: the pace of the run just made
    err = capsys.readouterr().err
    assert 'would ask 3 questions of answer, 4 at a time' in err, err
    assert re.search(r'time: about \d+ s, at the pace of the run in answers.json \(2 questions in \d+ s, 4 at a time\)',
                     err), err
    assert (tmp_path/'asked.txt').read_text().count('\n') == 2 and (tmp_path/'answers.json').read_bytes() == before


def test_evaluate_says_its_questions_then_the_checking_calls_before_the_first_and_a_dry_run_asks_none(
        tmp_path, monkeypatch, capsys):
    import json
    from ragnb.testing.scripted import ScriptedServer
    (tmp_path/'rag_eval_est.py').write_text('from pathlib import Path\n'
                                   'def answer(q):\n'
                                   '    Path("asked.txt").open("a").write(q + "\\n")\n'
                                   '    return "Hubble launched in 1990.", ["Hubble launched in 1990 on a shuttle."]\n')
    (tmp_path/'qs.jsonl').write_text(''.join(json.dumps(dict(id=f'q{i}', question=f'When did Hubble launch {i}?',
                                                             answer='Hubble was launched in 1990.')) + '\n'
                                             for i in range(3)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL'): monkeypatch.delenv(v, raising=False)
    args = ['evaluate', 'qs.jsonl', '--system', 'rag_eval_est:answer', '--out', 'ev', '--judge-profile', 'default']
    assert main(args + ['--dry-run']) == 0   # no endpoint needed to say what a run would do
    err = capsys.readouterr().err
    assert 'ragnb evaluate: would ask 3 questions of answer' in err, err
    assert ('ragnb evaluate: checking: judge profile default (asked for); its calls, price and time are said once '
            'the answers are in, before the first checking call') in err, err
    assert not (tmp_path/'asked.txt').exists() and not (tmp_path/'ev').exists() and not (tmp_path/'cache').exists()
    with ScriptedServer() as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        assert main(args + ['--model', 'scripted-test-model']) == 0
        err = capsys.readouterr().err
        first_check = len(srv.requests)
    m = re.search(r'ragnb evaluate: checking will send about (\d+) model calls \(6 extracting claims, (\d+) checking '
                  r'them\)', err)
    assert m and int(m[1]) == 6 + int(m[2]), err   # a response and a reference answer of each of the 3 answers
    assert "ragnb evaluate: checking price: none (scripted-test-model is free in ragnb's table)" in err, err
    assert 'ragnb evaluate: checking time: no estimate yet' in err, err
    assert err.index('will ask 3 questions') < err.index('checking will send') and first_check > 0
    assert (tmp_path/'asked.txt').read_text().count('\n') == 3 and (tmp_path/'ev'/'metrics.json').exists()


def test_check_says_its_price_before_the_first_call(tmp_path, monkeypatch, capsys):
    from ragnb.core.samples import sample_path
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'RAGNB_MODEL'): monkeypatch.delenv(v, raising=False)
    example = sample_path('ragchecker', 'examples', 'checking_inputs.json')
    assert main(['check', str(example), '--out', str(tmp_path/'out.json'), '--dry-run']) == 0
    err = capsys.readouterr().err
    assert re.search(r"ragnb check: would send about [\d,]+ model calls .*\n"
                     r"ragnb check: price: about \$\d+\.\d+ at gpt-4o-mini's prices \(--batch: about \$\d+\.\d+\)\n"
                     r"ragnb check: time: no estimate yet", err), err
    assert not (tmp_path/'out.json').exists() and not (tmp_path/'cache').exists()
