"""What a new user meets first, through the command line: no endpoint, a server that answers nothing, `ragnb show` on
a demo's folder and on an offline parse; each message names what happened and what to do next."""
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pymupdf
import pytest

from ragnb.app.cli import main
from ragnb.app.demo import sample_docs

GUIDE = sample_docs()/'what_makes_documentation_good.md'


class EmptyReplies:
    "An OpenAI-compatible endpoint on 127.0.0.1 whose every chat completion has no message content (finish_reason stop)."
    def __init__(self):
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                self.rfile.read(int(self.headers.get('content-length') or 0))
                data = json.dumps({'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'tiny', 'choices': [
                    {'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': None}}],
                    'usage': {'prompt_tokens': 5, 'completion_tokens': 0, 'total_tokens': 5}}).encode()
                self.send_response(200); self.send_header('content-type', 'application/json')
                self.send_header('content-length', str(len(data))); self.end_headers(); self.wfile.write(data)
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.base_url = f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
    def __enter__(self): return self
    def __exit__(self, *a): self.httpd.shutdown(); self.httpd.server_close()


def _no_endpoint(monkeypatch):
    for v in ('OPENAI_BASE_URL', 'OPENAI_API_KEY', 'AZURE_OPENAI_ENDPOINT'): monkeypatch.delenv(v, raising=False)


def test_generate_without_an_endpoint_names_the_three_ways_and_calls_nothing(tmp_path, monkeypatch, capsys):
    _no_endpoint(monkeypatch)
    assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2']) == 2
    err = capsys.readouterr().err
    assert 'ragnb generate: no model endpoint is configured' in err, err
    for way in ('OPENAI_BASE_URL', 'ragnb local install', 'ragnb local serve', 'ragnb demo'): assert way in err, way
    assert not (tmp_path/'qa.jsonl').exists() and not (tmp_path/'ragnb-cache'/'calls.sqlite').exists()


def test_check_without_an_endpoint_estimates_then_says_how_to_get_a_model(tmp_path, monkeypatch, capsys):
    _no_endpoint(monkeypatch)
    results = {'results': [{'query_id': 'q1', 'query': 'Who wrote it?', 'gt_answer': 'Ann wrote it.',
                            'response': 'Ann wrote it.', 'retrieved_context': [{'doc_id': 'd', 'text': 'Ann wrote it.'}]}]}
    (tmp_path/'in.json').write_text(json.dumps(results))
    assert main(['check', str(tmp_path/'in.json'), '--out', str(tmp_path/'out.json')]) == 2
    err = capsys.readouterr().err
    assert 'will send about' in err and 'ragnb check: no model endpoint is configured' in err, err
    assert 'ragnb local install' in err and not (tmp_path/'out.json').exists()


def test_parse_without_an_endpoint_goes_offline_and_says_so(tmp_path, monkeypatch, capsys):
    _no_endpoint(monkeypatch)
    doc = pymupdf.open(); page = doc.new_page()
    page.insert_text((72, 72), 'Quarterly revenue rose to 12 million euros.', fontsize=11)
    doc.save(tmp_path/'report.pdf')
    assert main(['parse', str(tmp_path/'report.pdf'), '--out', str(tmp_path/'parsed')]) == 0
    err = capsys.readouterr().err
    assert 'no model endpoint is configured' in err and 'offline' in err and '--offline' in err, err
    m = json.loads((tmp_path/'parsed'/'manifest.json').read_text())
    assert m['mode'] == 'offline' and 'Quarterly revenue' in (tmp_path/'parsed'/'page_1.md').read_text()
    # `ragnb show` on it: no model was called, and what the manifest holds, page by page
    assert main(['show', str(tmp_path/'parsed'), '1']) == 0
    out = capsys.readouterr().out
    assert out.startswith('no model call: report.pdf was parsed offline') and 'page 1: its text layer' in out, out


def test_all_calls_failed_names_the_endpoint_the_reason_and_the_fix(tmp_path, monkeypatch, capsys):
    with EmptyReplies() as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
        code = main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '2', '--max-retries',
                     '0', '--model', 'tiny'])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f'ragnb generate: model tiny at {srv.base_url}'), err   # said before the first call
    assert f"replies cached in {tmp_path/'cache'/'calls.sqlite'}" in err, err   # an empty cache is a cache, not 'no cache'
    line = next(l for l in err.splitlines() if 'calls failed' in l)
    assert 'the reply has no message content (finish_reason=stop)' in line and srv.base_url in line, line
    assert 'likely fix: the server answered with no text' in line, line


def test_show_finds_the_calls_file_beside_the_output(tmp_path, monkeypatch, capsys):
    from ragnb.core.llm import LLM
    from ragnb.synth.generate import generate_dataset
    from ragnb.testing.scripted import ScriptedServer
    out = tmp_path/'demo-out'; out.mkdir()
    with ScriptedServer() as srv:   # a run that keeps its calls in its own folder, as `ragnb demo` does
        llm = LLM(base_url=srv.base_url, api_key='sk-test', model='scripted-test-model', cache_path=out/'calls.sqlite',
                  progress=False)
        ds = generate_dataset([GUIDE], llm, max_chunks=1, check_language=False)
    ds.save(out/'dataset.jsonl')
    rid = ds.df.id.iloc[0]
    assert main(['show', str(out/'dataset.jsonl'), rid]) == 0   # no --cache: the user cache holds nothing of this run
    got = capsys.readouterr().out
    assert f"from {out/'calls.sqlite'}" in got and 'factoid_qa@1' in got, got[:500]


def test_progress_in_a_log_says_done_failed_and_time_left(tmp_path, monkeypatch, capsys):
    from ragnb.testing.scripted import ScriptedServer
    monkeypatch.setenv('RAGNB_PROGRESS_SECONDS', '0')   # a line at every call (30 s apart by default)
    with ScriptedServer() as srv:
        monkeypatch.setenv('OPENAI_BASE_URL', srv.base_url); monkeypatch.setenv('OPENAI_API_KEY', 'sk-test')
        assert main(['generate', str(GUIDE), '--out', str(tmp_path/'qa.jsonl'), '--max-chunks', '3',
                     '--model', 'scripted-test-model']) == 0
    err = capsys.readouterr().err   # stderr is not a terminal here: no progress bar, lines instead
    assert 'questions (round 1): 1 of 3 done, 0 failed, about' in err and ' left' in err, err
    assert 'critiques: 1 of 9 done, 0 failed, about' in err, err


@pytest.mark.parametrize('argv,command', [
    (['audit', 'RESULTS'], 'audit'),
    (['meta-eval', '--run', '--sample', '2'], 'meta-eval --run'),
    (['evaluate', 'DATASET', '--system', 'mymod:answer', '--out', 'OUT'], 'evaluate'),
])
def test_other_commands_that_need_a_model_say_how_to_get_one(argv, command, tmp_path, monkeypatch, capsys):
    from ragnb.core.samples import sample_path
    _no_endpoint(monkeypatch); monkeypatch.chdir(tmp_path)
    argv = [str(sample_path('ragchecker', 'examples', 'checking_outputs.json')) if a == 'RESULTS' else
            str(tmp_path/'qa.jsonl') if a == 'DATASET' else str(tmp_path/'out.json') if a == 'OUT' else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f'ragnb {command}: no model endpoint is configured' in err and 'ragnb local install' in err, err
    assert not list(tmp_path.iterdir())
