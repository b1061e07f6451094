"""Runs `nbdev_test --path NB --do_print` (its function, as its command line calls it) for one notebook at a time,
each in a fresh forked process.

Started once per test session by tests/test_notebooks.py. It imports, once, what `nbdev_test` itself imports before it
runs a notebook (nbdev, execnb, IPython, matplotlib) and nothing else: each notebook then runs in a child forked from
here, so it starts with exactly the modules a `nbdev_test` process starts with (a lesson that checks what is loaded
sees what it would see there), imports ragnb afresh and leaves nothing behind for the next one.

Protocol: one JSON line per notebook on stdin, `[notebook path, log file, environment, timeout in seconds]`; one JSON
line back on stdout, the child's exit code (negative: killed by that signal)."""
import json, os, signal, sys, threading
sys.path.pop(0)  # tests/, which a `nbdev_test` process does not see

import nbdev.test, execnb.shell  # noqa: E401,F401  (what `nbdev_test` imports before it runs a notebook)

def run(nb, log, env, timeout):
    "Fork; the child runs the `nbdev_test` command line on `nb` with `env`, its output in `log`; return its exit code."
    assert threading.active_count() == 1, 'the runner must have no threads when it forks'
    pid = os.fork()
    if pid == 0:  # the child: the notebook's own process
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1); os.dup2(fd, 2); os.close(fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdout = os.fdopen(1, 'w', buffering=1); sys.stderr = os.fdopen(2, 'w', buffering=1)
            os.environ.clear(); os.environ.update(env)
            signal.alarm(int(timeout))  # SIGALRM ends the child, as the old subprocess's timeout did
            try: nbdev.test.nbdev_test(path=nb, do_print=True); code = 0  # `nbdev_test --path NB --do_print`
            except SystemExit as e: code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            import traceback; traceback.print_exc()
        finally:
            try: sys.stdout.flush(); sys.stderr.flush()
            finally: os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)

if __name__ == '__main__':
    out = os.fdopen(os.dup(1), 'w', buffering=1)
    for line in sys.stdin:
        out.write(json.dumps(run(*json.loads(line))) + '\n')
