"""Issue 52: `from ragnb import *` is the front door: the names a notebook user calls, each imported from its module
the first time it is used, so `import ragnb` and `import ragnb.X` stay light."""
import importlib, subprocess, sys
import pytest
import ragnb


def _run(code:str) -> str:
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip()


def test_every_front_door_name_is_the_object_its_module_defines():
    names = [n for n in ragnb.__all__ if n != '__version__']
    assert len(names) == len(set(names)) and 50 <= len(names) < 100
    for name in names:
        home = importlib.import_module(ragnb._HOME[name])
        assert getattr(ragnb, name) is getattr(home, name), name
        assert name in home.__all__, f"{name} is not public in {home.__name__}"


def test_star_import_gives_the_pipeline_and_nothing_private():
    out = _run("from ragnb import *\nimport ragnb\n"
               "print(sorted(n for n in ragnb.__all__ if n not in globals()))\n"
               "print(callable(load_documents), callable(corrected_metrics), callable(plot_metrics), LLM.__name__)")
    missing, used = out.splitlines()
    assert missing == '[]'
    assert used == 'True True True LLM'
    assert not [n for n in ragnb.__all__ if n.startswith('_') and n != '__version__']


def test_import_ragnb_loads_no_stage():
    "The front door imports nothing until a name is used: a command's start-up does not pay for it."
    out = _run("import sys, ragnb, ragnb.core.safe\n"
               "print(sorted(m for m in sys.modules if m.startswith('ragnb.') and m != 'ragnb.core.safe' "
               "and m != 'ragnb.core'), 'pandas' in sys.modules, 'matplotlib' in sys.modules)")
    assert out == '[] False False', out


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'load_document'"): ragnb.load_document
    assert 'load_documents' in dir(ragnb) and '__version__' in dir(ragnb)
