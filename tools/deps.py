"""The test environment's lock, and the drift check against the newest releases.

    python tools/deps.py check            # is tests/constraints.txt a valid lock? (name==version lines)
    python tools/deps.py drift            # newest releases in a throw-away venv: what moved, and the tests on them
    python tools/deps.py lock             # the same; when the tests pass, write tests/constraints.txt from that venv

`tests/constraints.txt` holds the exact versions the suite last passed with. The README's test command and `.ci/run`
install with it (`pip install -e ".[dev]" -c tests/constraints.txt`), so a new upstream release cannot turn CI red on
its own. The package's requirements (settings.ini) keep lower bounds: users get current releases, and `drift` is how
we learn, outside CI's gate, what those releases do to us. Each step prints its name; a failed step says which one.
"""
from __future__ import annotations
import argparse, os, re, shutil, subprocess, sys, tempfile, time, xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO/'tests'/'constraints.txt'
END = re.compile(r'# end of the lock: (\d+) pins')   # the last line: a file cut short has none, or another count
PIN = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$')   # name==version, nothing else

class StepFailed(Exception):
    "A named step of the check failed; the message says which and why."

def shown(p:Path) -> str: return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)

def norm(name:str) -> str: return re.sub(r'[-_.]+', '-', name).lower()   # PEP 503

def read_lock(path:Path) -> dict:
    "{normalised name: version} of a lock file; `StepFailed` naming the file and line of anything else."
    if not path.is_file(): raise StepFailed(f"read the lock: {path} does not exist (make it: python tools/deps.py lock)")
    pins = {}
    for n, line in enumerate(path.read_text(encoding='utf-8', errors='replace').splitlines(), 1):
        s = line.split('#', 1)[0].strip()
        if not s: continue
        m = PIN.match(s)
        if not m: raise StepFailed(f"read the lock: {path}:{n}: {s[:80]!r} is not 'name==version'")
        if norm(m[1]) in pins: raise StepFailed(f"read the lock: {path}:{n}: {m[1]} is pinned twice")
        pins[norm(m[1])] = m[2]
    if not pins: raise StepFailed(f"read the lock: {path} pins nothing")
    last = [l.strip() for l in path.read_text(encoding='utf-8', errors='replace').splitlines() if l.strip()][-1]
    m = END.fullmatch(last)
    if not m or int(m[1]) != len(pins):   # a lock cut short at a line end would otherwise pass with pins missing
        raise StepFailed(f"read the lock: {path} is cut short or edited: it must end with '# end of the lock: "
                         f"{len(pins)} pins' (write it again: python tools/deps.py lock)")
    return pins

def run(step:str, cmd:list, **kw) -> subprocess.CompletedProcess:
    "Run one step; `StepFailed` with its name and the tail of its output when it fails."
    print(f"== {step}: {' '.join(map(str, cmd[:6]))}{' ...' if len(cmd) > 6 else ''}", flush=True)
    t0 = time.monotonic()
    try: r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    except OSError as e: raise StepFailed(f"{step}: could not start {cmd[0]}: {e}") from None
    if r.returncode:
        tail = '\n'.join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise StepFailed(f"{step}: exit {r.returncode}\n{tail}")
    print(f"   done in {time.monotonic() - t0:.0f} s", flush=True)
    return r

def freeze(python:Path) -> dict:
    r = run('list what was installed', [python, '-m', 'pip', 'freeze', '--exclude-editable'])
    return {norm(m[1]): m[2] for line in r.stdout.splitlines() if (m := PIN.match(line.strip()))}

def write_lock(path:Path, pins:dict, n:dict, python) -> None:
    "Write `tests/constraints.txt`: `pins` (from a venv where the suite gave counts `n`), with a header saying so."
    ver = subprocess.run([python, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
                         capture_output=True, text=True).stdout.strip()
    head = [f"# ragnb's test environment: the exact versions the suite last passed with ({n['passed']} passed, "
            f"{n['skipped']} skipped, {n['failed']} failed)",
            f"# on {date.today()}, Python {ver}, Linux x86_64.",
            "# Used by the README's test command and .ci/run: pip install -e \".[dev]\" -c tests/constraints.txt",
            "# Made by `python tools/deps.py lock`; do not edit by hand (run it again instead)."]
    text = '\n'.join(head + [f"{k}=={v}" for k, v in sorted(pins.items())] + [f"# end of the lock: {len(pins)} pins"]) + '\n'
    tmp = path.with_name(f".{path.name}.tmp")   # written whole, then renamed: a full disk never leaves half a lock
    try:
        with open(tmp, 'w', encoding='utf-8') as f: f.write(text); f.flush(); os.fsync(f.fileno())
        os.replace(tmp, path)
    finally: tmp.unlink(missing_ok=True)

def _key(v:str): return [int(p) if p.isdigit() else p for p in re.split(r'[.+!-]', v)]

def moved(old:dict, new:dict) -> list[str]:
    "Lines saying which packages moved between two {name: version} sets."
    out = []
    for n in sorted(old.keys() | new.keys()):
        a, b = old.get(n), new.get(n)
        if a == b: continue
        if a is None: out.append(f"  new   {n} {b}")
        elif b is None: out.append(f"  gone  {n} {a}")
        else:
            try: up = _key(b) > _key(a)
            except TypeError: up = True
            out.append(f"  {'up' if up else 'down':5} {n} {a} -> {b}")
    return out

def results(xml:Path) -> tuple[dict, list]:
    "Counts and the failed test ids of a pytest junit file."
    n, failed = dict(passed=0, skipped=0, failed=0), []
    for case in ET.parse(xml).getroot().iter('testcase'):
        if case.find('failure') is not None or case.find('error') is not None:
            n['failed'] += 1
            bad = case.find('failure') if case.find('failure') is not None else case.find('error')
            msg = (bad.get('message') or '').strip().splitlines()
            failed.append(f"{case.get('classname')}::{case.get('name')}: {msg[0][:160] if msg else ''}")
        elif case.find('skipped') is not None: n['skipped'] += 1
        else: n['passed'] += 1
    return n, failed

def newest_env(where:Path, python:str, installer:str) -> Path:
    "A fresh venv at `where` with ragnb's dev extra at the newest releases (no lock); its python."
    run('make a throw-away venv', [python, '-m', 'venv', where])
    py = where/'bin'/'python'
    if installer == 'uv':
        run('install uv', [py, '-m', 'pip', 'install', '-q', 'uv'])
        run('install ragnb[dev], newest releases (uv)',
            [where/'bin'/'uv', 'pip', 'install', '-q', '--python', py, '-e', f'{REPO}[dev]'], cwd=REPO)
    else:
        run('install ragnb[dev], newest releases (pip)',
            [py, '-m', 'pip', 'install', '-q', '--no-cache-dir', '-e', f'{REPO}[dev]'], cwd=REPO,
            env={**os.environ, 'PIP_CONSTRAINT': ''})   # no machine-wide cap: the newest the index serves
    return py

def drift(args) -> int:
    "Install the newest releases, print what moved against the lock, run the tests; 0 when they pass."
    try: locked = read_lock(args.lock)
    except StepFailed as e: print(f"(no usable lock to compare with: {e})"); locked = {}
    tmp = Path(tempfile.mkdtemp(prefix='ragnb-drift-'))
    try:
        py = newest_env(tmp/'venv', args.python, args.installer)
        now = freeze(py)
        lines = moved(locked, now)
        print(f"\n{len(lines)} package(s) differ from {shown(args.lock)}:" if lines else
              f"\nthe newest releases are the locked ones ({len(now)} packages)")
        print('\n'.join(lines))
        xml = tmp/'junit.xml'
        cmd = [py, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', f'--junitxml={xml}', *args.pytest_args]
        print(f"\n== run the tests on the newest releases: {' '.join(map(str, cmd[2:]))}", flush=True)
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'PYTHONPATH')})
        if not xml.is_file():
            raise StepFailed("run the tests: pytest wrote no results\n" + '\n'.join((r.stdout + r.stderr).splitlines()[-15:]))
        n, failed = results(xml)
        print(f"   {n['passed']} passed, {n['skipped']} skipped, {n['failed']} failed in {time.monotonic() - t0:.0f} s")
        for f in failed: print('  FAILED', f)
        ok = r.returncode == 0 and n['passed'] > 0
        if args.cmd == 'lock':
            if not ok: print(f"\nthe tests failed on the newest releases: {shown(args.lock)} is unchanged"); return 1
            write_lock(args.lock, now, n, py); print(f"\nwrote {shown(args.lock)}: {len(now)} pins, {len(lines)} changed")
        return 0 if ok else 1
    finally:
        if args.keep: print(f"kept {tmp}")
        else: shutil.rmtree(tmp, ignore_errors=True)

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('cmd', choices=['check', 'drift', 'lock'])
    p.add_argument('--python', default=sys.executable, help='interpreter to build the throw-away venv from')
    p.add_argument('--installer', choices=['pip', 'uv'], default='pip')
    p.add_argument('--keep', action='store_true', help='keep the throw-away venv (its path is printed)')
    p.add_argument('--lock', type=Path, default=None, help=f'the lock file (default: {LOCK.relative_to(REPO)})')
    p.add_argument('pytest_args', nargs='*', help='after --: what to pass to pytest (default: the whole suite)')
    args = p.parse_args(argv)
    args.lock = (args.lock or LOCK).resolve()
    try:
        if args.cmd == 'check':
            pins = read_lock(args.lock); print(f"{shown(args.lock)}: {len(pins)} pins, valid"); return 0
        return drift(args)
    except StepFailed as e:
        print(f"tools/deps.py {args.cmd}: step failed: {e}", file=sys.stderr); return 2

if __name__ == '__main__': sys.exit(main())
