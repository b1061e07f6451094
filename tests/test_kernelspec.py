"Every notebook names its kernel, so JupyterLab starts it instead of asking 'Select Kernel'; nbdev_clean keeps it."
import copy, json
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
NOTEBOOKS = sorted(NBS.glob('*.ipynb'))


@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_names_python3_kernel(path):
    ks = json.loads(path.read_text())['metadata'].get('kernelspec', {})
    assert (ks.get('name'), ks.get('language')) == ('python3', 'python'), f'{path.name}: kernelspec {ks}'


def test_nbdev_clean_keeps_the_kernelspec():
    "nbdev_clean with this project's settings.ini (allowed_metadata_keys) leaves the kernelspec as it is."
    from nbdev.clean import clean_nb
    from nbdev.config import get_config
    cfg = get_config(path=NBS.parent)
    keys = [k for k in str(cfg.get('allowed_metadata_keys', '')).split() if k]
    cell_keys = [k for k in str(cfg.get('allowed_cell_metadata_keys', '')).split() if k]
    nb = json.loads(NOTEBOOKS[0].read_text())
    before = copy.deepcopy(nb['metadata']['kernelspec'])
    clean_nb(nb, clear_all=cfg.get('clear_all', 'False') == 'True', allowed_metadata_keys=keys,
             allowed_cell_metadata_keys=cell_keys)
    assert nb['metadata']['kernelspec'] == before
