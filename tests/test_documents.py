"Loading and splitting documents: bad input is reported, offsets are exact."
import os, subprocess
from pathlib import Path
import pytest
from ragnb.docs.documents import (Document, Documents, LoadIssue, load_folder, load_git, load_documents, read_text, LoadError,
                             split_document, split_documents, chunk_offsets, splitter)
from ragnb.core.samples import sample_path

COOKBOOK = sample_path('openai-cookbook')

def _git(*args, cwd): subprocess.run(['git', '-c', 'user.name=t', '-c', 'user.email=t@t', *args], cwd=cwd, check=True, capture_output=True)

@pytest.fixture
def tree(tmp_path):
    root = tmp_path/'docs'; (root/'sub').mkdir(parents=True)
    (root/'a.md').write_text('# A\n\nAlpha text.\n')
    (root/'sub'/'b.md').write_text('# B\n\nBeta text.\n')
    (root/'c.txt').write_text('not selected')
    (root/'bin.md').write_bytes(b'\x00\x01\x02binary')
    (root/'bad.md').write_bytes(b'caf\xe9')
    (root/'empty.md').write_text('\n \n')
    outside = tmp_path/'secret.md'; outside.write_text('secret')
    (root/'leak.md').symlink_to(outside)
    (root/'inside.md').symlink_to(root/'a.md')
    (root/'.git').mkdir(); (root/'.git'/'x.md').write_text('ignored')
    return root

def test_folder_loads_good_and_reports_bad(tree):
    docs = load_folder(tree, glob='*.md')
    assert sorted(d.file_path for d in docs) == ['a.md', 'inside.md', 'sub/b.md']
    reasons = {i.path: i.reason for i in docs.issues}
    assert set(reasons) == {'bin.md', 'bad.md', 'empty.md', 'leak.md'}
    assert 'binary' in reasons['bin.md'] and 'utf-8' in reasons['bad.md'] and 'empty' in reasons['empty.md']
    assert 'outside the root' in reasons['leak.md']
    b = next(d for d in docs if d.file_name == 'b.md')
    assert (b.file_type, b.source, b.id, b.text) == ('.md', str(tree), 'sub/b.md', '# B\n\nBeta text.\n')
    assert 'sub/b.md' in b._repr_markdown_() and 'skipped' in docs._repr_markdown_()

def test_read_text_bom_and_encoding(tmp_path):
    (tmp_path/'bom.md').write_bytes('\ufeffHallo Welt'.encode('utf-8'))
    assert read_text(tmp_path/'bom.md') == 'Hallo Welt'
    (tmp_path/'l1.md').write_bytes('Grüße'.encode('latin-1'))
    with pytest.raises(LoadError, match='not valid utf-8'): read_text(tmp_path/'l1.md')
    assert read_text(tmp_path/'l1.md', encoding='latin-1') == 'Grüße'

def test_git_clone_branch_and_failure(tmp_path, monkeypatch):
    monkeypatch.setenv('RAGNB_CACHE_DIR', str(tmp_path/'cache'))
    repo = tmp_path/'repo'; repo.mkdir()
    (repo/'one.md').write_text('# One\n\nFirst.\n'); (repo/'x.py').write_text('print(1)')
    _git('init', '-q', '-b', 'main', cwd=repo); _git('add', '.', cwd=repo); _git('commit', '-qm', 'c1', cwd=repo)
    _git('checkout', '-qb', 'dev', cwd=repo); (repo/'two.md').write_text('# Two\n\nSecond.\n')
    _git('add', '.', cwd=repo); _git('commit', '-qm', 'c2', cwd=repo)
    main = load_git(str(repo), branch='main', glob='*.md')
    dev = load_git(str(repo), branch='dev', glob='*.md')
    assert [d.file_path for d in main] == ['one.md']
    assert sorted(d.file_path for d in dev) == ['one.md', 'two.md']
    assert dev[0].metadata['branch'] == 'dev' and len(dev[0].metadata['commit']) == 12
    bad = load_git(str(tmp_path/'not-a-repo'))
    assert len(bad) == 0 and bad.issues[0].path == str(tmp_path/'not-a-repo') and 'git clone failed' in bad.issues[0].reason
    nobranch = load_git(str(repo), branch='nope')
    assert 'nope' in nobranch.issues[0].reason
    # load_documents: a local repo with a branch is cloned; the rest still loads
    mixed = load_documents(repo, tmp_path/'missing', branch='dev', glob='*.md')
    assert sorted(d.file_path for d in mixed) == ['one.md', 'two.md']
    assert [i.reason for i in mixed.issues] == ['no such file or folder']

def test_load_documents_unique_ids(tree, tmp_path):
    other = tmp_path/'other'; other.mkdir(); (other/'a.md').write_text('Another a.')
    docs = load_documents(tree, other, tree/'c.txt', glob='*.md')
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) and 'c.txt' in ids
    assert any(i.endswith(':a.md') for i in ids)

def _check(doc, chunks):
    for c in chunks:
        assert doc.text[c.start_index:c.end_index] == c.text
        assert c.doc_id == doc.id
    assert [c.start_index for c in chunks] == sorted(c.start_index for c in chunks)

def test_offsets_exact_on_repeated_text():
    text = ('| a | b |\n' * 50 + 'Same sentence here. ' * 40 + '\n\n') * 3
    doc = Document(text, 'mem', 'rep.md', 'rep.md', '.md')
    for size, overlap in [(30, 10), (64, 0), (100, 50), (200, 20)]:
        chunks = split_document(doc, size, overlap)
        assert len(chunks) > 3 and max(len(c) for c in chunks) <= size
        _check(doc, chunks)

def test_offsets_raise_when_chunk_not_in_text():
    with pytest.raises(ValueError, match='chunk not found'): chunk_offsets('abc def', ['abc', 'xyz'], 0)

def test_separator_order_and_overlap():
    text = 'First sentence one. Second sentence two. Third sentence three.\n\nNew paragraph here.'
    pieces = splitter(45, 0).split_text(text)
    assert pieces[0] == 'First sentence one. Second sentence two.'  # period kept at the end
    doc = Document('one two three four five six seven eight nine ten eleven twelve', 'mem', 'p.md', 'p.md', '.md')
    ov = split_document(doc, 20, 10)
    _check(doc, ov)
    assert any(a.end_index > b.start_index for a, b in zip(ov, ov[1:]))  # neighbours share text
    assert all(b.start_index >= a.end_index for a, b in zip(split_document(doc, 30, 0), split_document(doc, 30, 0)[1:]))

def test_cookbook_chunks_exact():
    docs = load_folder(COOKBOOK)
    assert len(docs) == 83 and not docs.issues
    chunks = split_documents(docs)
    byid = {d.id: d for d in docs}
    assert len(chunks) > len(docs)
    for c in chunks: assert byid[c.doc_id].text[c.start_index:c.end_index] == c.text
    assert all(len(c) <= 3000 for c in chunks)

def test_plain_repr_is_one_short_line():
    # notebooks store the plain repr next to the markdown one: it must not carry the text
    doc = Document('word ' * 20000, 'mem', 'big.md', 'big.md', '.md')
    assert repr(doc) == "Document('big.md', .md, 100,000 chars, from 'mem')"
    docs = load_folder(COOKBOOK)
    assert repr(docs) == f'Documents(83 documents, {docs.chars:,} chars, 0 skipped)' and docs.chars > 500_000
