"Test helper: what a spreadsheet would run in a CSV file ragnb writes (issue 40, items 8 and 17)."
import csv
from pathlib import Path

FORMULA = ('=', '+', '@', '\t', '\r')

def cells(path:Path) -> list:
    "Every cell of a CSV file, row by row."
    return [c for row in csv.reader(path.read_text(encoding='utf-8').splitlines()) for c in row]

def formula_free(path:Path):
    "No cell a spreadsheet would run: text starting with = + @ tab CR, or '-' that is not a number."
    for c in cells(path):
        assert not c.startswith(FORMULA), f"{path.name}: {c!r}"
        if c.startswith('-'): float(c)   # a negative number is fine; '-2+3' as text is not
