"""The ICDAR-2013 development set (shared/data/documents/icdar2013): documents, human table regions and cells.

Coordinates in the XML files are PDF points with a bottom-left origin and pages count from 1 (see the set's README);
everything here returns top-left boxes, as PyMuPDF and ragnb use. `ID-reg.xml`/`ID-str.xml` describe `ID.pdf`; the
`*b-reg.xml` files without a PDF are a second annotator's reading of the `a` document and are not used.
"""
import os, re, unicodedata, xml.etree.ElementTree as ET
from pathlib import Path
import pymupdf

ROOT = Path(__file__).resolve().parent.parent

def shared_dir(arg:str|None=None)->Path:
    "The shared data folder: `arg`, else `ragnb.core.samples.shared_root()` ($RAGNB_SHARED_DATA, else the shared folder beside the repository)."
    from ragnb.core.samples import shared_root
    d = Path(arg) if arg else shared_root()
    return d/'data' if (d/'data').is_dir() else d

def dev_docs(shared:Path, names:list[str]|None=None)->list[Path]:
    "The development set's PDFs (those with a `-reg.xml`), sorted by name; `names` keeps only those stems."
    pdfs = sorted((shared/'documents/icdar2013').glob('*/*.pdf'))
    pdfs = [p for p in pdfs if p.with_name(p.stem+'-reg.xml').exists()]
    return [p for p in pdfs if names is None or p.stem in names]

def _flip(bb, h):
    "A bottom-left box element as a top-left tuple; stray characters in numbers (one file has x2='26ß') are dropped."
    x1, y1, x2, y2 = (float(re.sub(r'[^0-9.\-]', '', bb.get(k))) for k in ('x1', 'y1', 'x2', 'y2'))
    return (min(x1, x2), h-max(y1, y2), max(x1, x2), h-min(y1, y2))

def truth_regions(pdf:Path, doc:pymupdf.Document)->list[tuple[int, tuple]]:
    "Human table regions of `pdf`: (page from 1, top-left box), one per region (a table may have several)."
    root = ET.parse(pdf.with_name(pdf.stem+'-reg.xml')).getroot()
    return [(int(r.get('page')), _flip(r.find('bounding-box'), doc[int(r.get('page'))-1].rect.height)) for r in root.iter('region')]

def truth_cells(pdf:Path, doc:pymupdf.Document)->list[dict]:
    "Human cell structure of `pdf`: per region, its page, box and {(row, col): text} of non-empty cells."
    out = []
    for reg in ET.parse(pdf.with_name(pdf.stem+'-str.xml')).getroot().iter('region'):
        pno = int(reg.get('page')); h = doc[pno-1].rect.height
        cells = {}
        for c in reg.iter('cell'):
            text = norm(c.findtext('content') or '')
            if text: cells[(int(c.get('start-row')), int(c.get('start-col')))] = text
        boxes = [_flip(c.find('bounding-box'), h) for c in reg.iter('cell') if c.find('bounding-box') is not None]
        bbox = (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)) if boxes else None
        out.append(dict(page=pno, bbox=bbox, cells=cells))
    return out

def norm(text:str)->str:
    "Cell text for comparison: NFKC, lower case, no whitespace (line breaks inside cells differ between tools)."
    return re.sub(r'\s+', '', unicodedata.normalize('NFKC', text)).lower()
