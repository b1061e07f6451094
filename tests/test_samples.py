"The sample data in nbs/data is what its inventory says, found from a clone; the shared sets come from one variable."
import csv, hashlib, json, os, shutil, subprocess, sys
from pathlib import Path

import pytest

import ragnb
from ragnb.core.samples import SHARED_ENV, sample_path, shared_path, shared_root

ROOT = Path(__file__).resolve().parents[1]
OURS = {'README.md', 'PROVENANCE.tsv'}   # written for ragnb, not listed in PROVENANCE.tsv


def provenance(): return list(csv.DictReader(sample_path('PROVENANCE.tsv').open(encoding='utf-8'), delimiter='\t'))

def git_blob(p:Path) -> str:
    b = p.read_bytes()
    return hashlib.sha1(b'blob %d\0' % len(b) + b).hexdigest()


def test_sample_path_is_the_repositorys_nbs_data():
    assert sample_path() == ROOT/'nbs'/'data'
    assert sample_path('documents', 'MANIFEST.csv').is_file()
    with pytest.raises(FileNotFoundError, match=r'documents/rh\.pdf: no such sample file'): sample_path('documents', 'rh.pdf')


def test_every_file_is_listed_with_its_size_blob_source_and_licence():
    rows = provenance()
    on_disk = {p.relative_to(sample_path()).as_posix() for p in sample_path().rglob('*') if p.is_file()} - OURS
    assert on_disk == {r['file'] for r in rows}
    for r in rows:
        p = sample_path(r['file'])
        assert (p.stat().st_size, git_blob(p)) == (int(r['bytes']), r['git_blob']), r['file']
        assert r['source_repo'] and r['licence'], r['file']
        if r['source_repo'] != 'ragnb': assert r['source_path'] and r['commit'], r['file']
    # every source's licence travels with its files
    for top in ('openai-cookbook', 'ragchecker', 'documents/camelot', 'documents/docling', 'documents/unstructured'):
        assert any(r['file'].startswith(top + '/LICENSE') for r in rows), top
    assert not any(r['file'].endswith('rh.pdf') for r in rows)   # its terms forbid redistribution


def test_readmes_state_the_data_size():
    total = sum(int(r['bytes']) for r in provenance())
    size = f'{total/1e6:.1f} MB'
    assert size in sample_path('README.md').read_text()
    assert size in (ROOT/'README.md').read_text()
    table = sample_path('README.md').read_text()
    for r in provenance():
        if not r['file'].startswith('openai-cookbook/'):
            shown = r['file'].replace('camelot/tests/files/tabula/icdar2013-dataset/competition-dataset-eu/', 'camelot/…/competition-dataset-eu/')
            assert f'`{shown}`' in table, r['file']


def test_an_installed_package_without_the_repository_says_where_the_data_is(tmp_path):
    site = tmp_path/'site'
    shutil.copytree(Path(ragnb.__file__).parent, site/'ragnb', ignore=shutil.ignore_patterns('data', '__pycache__'))
    code = 'from ragnb.core.samples import sample_path; sample_path("documents")'
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, 'PYTHONPATH': str(site)})
    assert r.returncode == 1
    assert "ragnb's sample data (the repository's nbs/data)" in r.stderr and 'pip install -e .' in r.stderr


def test_shared_path_follows_one_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(SHARED_ENV, raising=False)
    assert shared_root() == ROOT.parent/'shared'/'data'
    (tmp_path/'ragchecker').mkdir()
    monkeypatch.setenv(SHARED_ENV, str(tmp_path))
    assert shared_path('ragchecker') == tmp_path/'ragchecker'
    with pytest.raises(FileNotFoundError, match=f'documents: not found \\(\\$RAGNB_SHARED_DATA is {tmp_path}\\)'):
        shared_path('documents')


@pytest.mark.extended()
def test_copies_are_the_shared_originals():
    "Copied files are byte-identical to the shared data; the two reduced files keep every row, label and score."
    rows = provenance()
    for r in rows:
        if r['source_repo'] == 'ragnb' or 'reduced' in r['note']: continue
        assert sample_path(r['file']).read_bytes() == shared_path(r['file']).read_bytes(), r['file']
    for name in ('human_labeled_data.json', 'baseline_ragchecker.json'):
        ours = json.loads(sample_path('ragchecker', 'meta_evaluation', name).read_text())
        theirs = json.loads(shared_path('ragchecker', 'meta_evaluation', name).read_text())
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            for k, v in o.items():
                if k in ('model1', 'model2'): assert v == {f: t[k][f] for f in v}
                else: assert v == t[k]
    kept = {r['file'].removeprefix('documents/') for r in rows}
    manifest = lambda p: [r for r in csv.DictReader(p.open(encoding='utf-8'))]
    assert manifest(sample_path('documents', 'MANIFEST.csv')) == [r for r in manifest(shared_path('documents', 'MANIFEST.csv')) if r['file'] in kept]
