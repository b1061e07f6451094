"""Issue 41: `ragnb check` says how long it will take before the first call, from how long calls of the same prompts
with the same model took before (the call cache keeps it); without that history it says so. Real client, scripted
server."""
import json, re, time
from ragnb.app.cli import main
from ragnb.core.samples import sample_path
from ragnb.testing.scripted import ScriptedServer

def test_check_says_the_time_from_earlier_calls(tmp_path, monkeypatch, capsys):
    src = json.loads(sample_path('ragchecker', 'examples', 'checking_inputs.json').read_text())
    inp = tmp_path/'one.json'; inp.write_text(json.dumps({'results': src['results'][:1]}))
    with ScriptedServer(latency=0.02) as srv:
        for k, v in {'OPENAI_BASE_URL': srv.base_url, 'OPENAI_API_KEY': 'sk-test', 'RAGNB_MODEL': 'qwen2.5-1.5b',
                     'RAGNB_CACHE_DIR': str(tmp_path/'cache')}.items(): monkeypatch.setenv(k, v)
        assert main(['check', str(inp), '--out', str(tmp_path/'a.json'), '--dry-run']) == 0
        err = capsys.readouterr().err
        assert 'ragnb check: time: no estimate yet (no earlier call of' in err
        assert not (tmp_path/'cache').exists()   # a dry run writes nothing
        t0 = time.perf_counter()
        assert main(['check', str(inp), '--out', str(tmp_path/'a.json')]) == 0
        wall = time.perf_counter() - t0
        capsys.readouterr()
        folder = lambda: {f.name: f.read_bytes() for f in (tmp_path/'cache').iterdir()}
        import gc; gc.collect()   # the first run's connection closes now if nothing holds it (its -wal folded in)
        before = folder()
        assert main(['check', str(inp), '--out', str(tmp_path/'b.json'), '--dry-run']) == 0
        err = capsys.readouterr().err
        after = folder()   # read from the cache, nothing made there; if the first run's connection is still open,
        # its -shm/-wal stay and a reader takes its read mark in the shared-memory index, as SQLite's WAL reads do
        assert set(after) <= set(before) and after['calls.sqlite'] == before['calls.sqlite'], sorted(after)
        assert after.get('calls.sqlite-wal') == before.get('calls.sqlite-wal')
    m = re.search(r'time: about (\d+) s, at the pace of ([\d,]+) earlier calls', err)
    assert m, err
    assert 0.4 * wall <= int(m[1]) + 0.5 <= 2 * wall + 1, (m[1], wall, err, len(srv.requests))
    assert int(m[2].replace(',', '')) == len([r for r in srv.requests if r['prompt']])   # every call it made
