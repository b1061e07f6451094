"Every lesson notebook runs top to bottom (nbdev_test), offline, cells flagged live/browser/slow skipped."
import os, subprocess, sys
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1]/'nbs'
NOTEBOOKS = sorted(p.name for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))

@pytest.mark.parametrize('nb', NOTEBOOKS)
def test_notebook(nb):
    exe = Path(sys.executable).with_name('nbdev_test')
    r = subprocess.run([str(exe), '--path', str(NBS/nb), '--do_print'], capture_output=True, text=True, timeout=900,
                       cwd=NBS.parent, env={k: v for k, v in os.environ.items() if k not in ('OPENAI_API_KEY', 'OPENAI_BASE_URL', 'RAGNB_LIVE', 'RAGNB_RECORD')})
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
