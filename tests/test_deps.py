"The test environment's lock (tests/constraints.txt) and tools/deps.py, which checks, refreshes and drifts it."
import configparser, subprocess, sys
from pathlib import Path
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import deps  # noqa: E402

def _requirements():
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    return [Requirement(r) for k in ('requirements', 'dev_requirements') for r in cfg['DEFAULT'][k].split()]

def test_the_lock_pins_every_requirement_within_its_bounds():
    "A dependency added to settings.ini without a new lock, or a lock outside a bound, fails here (not on CI's machine)."
    pins = deps.read_lock(deps.LOCK)
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is required but tests/constraints.txt does not pin it: python tools/deps.py lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"lock pins {name}=={pins[name]}, outside {req}"
    assert 'ragnb' not in pins   # the package under test is installed from the work tree, never pinned

def test_a_bad_lock_is_named_by_file_and_line(tmp_path):
    bad = tmp_path/'constraints.txt'
    bad.write_text('# header\nopenai==3.60.0\nnumpy>=2\n')
    with pytest.raises(deps.StepFailed, match=r"read the lock: .*constraints.txt:3: 'numpy>=2' is not 'name==version'"):
        deps.read_lock(bad)
    bad.write_text('openai==3.60.0\nOpenAI==3.57.0\n')
    with pytest.raises(deps.StepFailed, match=':2: OpenAI is pinned twice'): deps.read_lock(bad)
    with pytest.raises(deps.StepFailed, match='does not exist'): deps.read_lock(tmp_path/'none.txt')

def test_check_command_says_the_step_not_a_traceback(tmp_path):
    bad = tmp_path/'c.txt'; bad.write_text('pandas==3.1.1\nnot a pin\n')
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'deps.py'), 'check', '--lock', str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    assert r.stderr.startswith('tools/deps.py check: step failed: read the lock:') and 'c.txt:2' in r.stderr
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'deps.py'), 'check'], capture_output=True, text=True)
    assert r.returncode == 0 and 'pins, valid' in r.stdout

def test_a_failed_step_names_itself():
    with pytest.raises(deps.StepFailed, match=r'^install ragnb: exit 3\nboom'):
        deps.run('install ragnb', [sys.executable, '-c', 'import sys; print("boom"); sys.exit(3)'])
    with pytest.raises(deps.StepFailed, match='could not start'): deps.run('make a venv', ['/no/such/python'])

def test_moved_says_which_way():
    lines = deps.moved({'openai': '3.57.0', 'httpx': '0.28.1', 'gone-pkg': '1.0'},
                       {'openai': '3.60.0', 'httpx': '0.28.1', 'httpx2': '2.16.2', 'numpy': '2.4.6'} | {})
    assert lines == ['  gone  gone-pkg 1.0', '  new   httpx2 2.16.2', '  new   numpy 2.4.6', '  up    openai 3.57.0 -> 3.60.0']
    assert deps.moved({'a': '1.10'}, {'a': '1.9'}) == ['  down  a 1.10 -> 1.9']   # numeric, not string, order

def test_the_lock_is_written_whole_or_not_at_all(tmp_path):
    "A full disk while writing keeps the old lock; a lock cut short at a line end is refused by `check`."
    import resource, textwrap
    lock = tmp_path/'constraints.txt'
    deps.write_lock(lock, {'openai': '3.60.0', 'numpy': '2.3.0'}, dict(passed=1, skipped=0, failed=0), sys.executable)
    assert deps.read_lock(lock) == {'openai': '3.60.0', 'numpy': '2.3.0'}
    before = lock.read_bytes()
    code = textwrap.dedent(f"""
        import resource, sys; sys.path.insert(0, {str(ROOT/'tools')!r}); import deps
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))   # a disk that fills after 200 bytes
        deps.write_lock(__import__('pathlib').Path({str(lock)!r}), {{f'pkg{{i}}': '1.0' for i in range(100)}},
                        dict(passed=1, skipped=0, failed=0), sys.executable)""")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode != 0 and lock.read_bytes() == before and not list(tmp_path.glob('.*.tmp'))
    cut = before.decode().splitlines(keepends=True)
    lock.write_text(''.join(cut[:-2]))   # cut at a line end: one pin and the end line gone
    with pytest.raises(deps.StepFailed, match='cut short'): deps.read_lock(lock)
