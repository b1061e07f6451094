"""Options out of their range are refused by the command line, naming the option and the range, before anything runs
(hostile round 4: `--half-width 0` was a ZeroDivisionError, `--confidence 1.5` cryptic, `--confidence 0` accepted,
`--claims-per-call 0` cryptic, `--port 70000` an OverflowError, `--ocr-dpi 0` a traceback and `-50` accepted)."""
import pytest
from ragnb.app.cli import main

CASES = [
    (['metrics', 'r.json', '--labels', 'l.jsonl', '--half-width', '0'], '--half-width', "'0' is not a number above 0"),
    (['metrics', 'r.json', '--confidence', '1.5'], '--confidence', "'1.5' is not a number above 0 and below 1"),
    (['metrics', 'r.json', '--confidence', 'nan'], '--confidence', "'nan' is not a number above 0 and below 1"),
    (['metrics', 'r.json', '--confidence', '0'], '--confidence', "'0' is not a number above 0 and below 1"),
    (['compare', 'a.json', 'b.json', '--confidence', '1'], '--confidence', "'1' is not a number above 0 and below 1"),
    (['check', 'r.json', '--claims-per-call', '0'], '--claims-per-call', "'0' is not a whole number at least 1"),
    (['local', 'serve', '--port', '70000'], '--port', "'70000' is not a whole number at least 0 and at most 65535"),
    (['local', 'serve', '--port', '-1'], '--port', "'-1' is not a whole number at least 0"),
    (['parse', 'x.pdf', '--out', 'o', '--ocr-dpi', '0'], '--ocr-dpi', "'0' is not a whole number at least 50"),
    (['parse', 'x.pdf', '--out', 'o', '--ocr-dpi', '-50'], '--ocr-dpi', "'-50' is not a whole number at least 50"),
    (['parse', 'x.pdf', '--out', 'o', '--ocr-dpi', '20000'], '--ocr-dpi', "'20000' is not a whole number at least 50 and at most 1200"),
]

@pytest.mark.parametrize('argv,option,says', CASES, ids=[' '.join(c[0][:1] + c[0][-2:]) for c in CASES])
def test_an_option_out_of_range_is_refused_with_its_range(argv, option, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e: main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: {says}" in err and 'Traceback' not in err, err
    assert not list(tmp_path.iterdir())   # nothing was written
