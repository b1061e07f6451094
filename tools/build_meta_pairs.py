"""Build `ragnb/data/ragchecker/meta_pairs.jsonl.gz` from RAGChecker's meta-evaluation files (shared data).

    python tools/build_meta_pairs.py [SHARED_META_DIR]   # default: $RAGNB_SHARED_DATA/ragchecker/meta_evaluation

One row per pair (280): instance_id, dataset, query_id, query, gt_answer, model1/model2 = {model_name, response,
ragchecker (RAGChecker's stored scores)}, and `human`: the two annotators' labels in file order. Responses come from
baseline_ragchecker.json's dicts and are checked against human_labeled_data.json's (read as data with
`ast.literal_eval` when they are python-repr strings, never `eval`); any difference stops the build.
"""
import ast, gzip, json, sys
from pathlib import Path

ASPECTS = ('correctness_label', 'completeness_label', 'overall_label')

def side(v, where):
    v = ast.literal_eval(v) if isinstance(v, str) else v
    if not isinstance(v, dict) or not {'model_name', 'response'} <= set(v): sys.exit(f"{where}: not a model dict")
    return v

def main():
    from ragnb.core.samples import shared_path
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else shared_path('ragchecker', 'meta_evaluation')
    human = json.loads((src/'human_labeled_data.json').read_text())
    base = json.loads((src/'baseline_ragchecker.json').read_text())
    labels = {}
    for i, h in enumerate(human):
        b = base[h['instance_id']]
        if b['instance_id'] != h['instance_id']: sys.exit(f"baseline row {h['instance_id']} is not that instance")
        for k in ('dataset', 'query_id', 'query', 'gt_answer'):
            if h[k] != b[k]: sys.exit(f"human row {i}: {k} differs from baseline_ragchecker.json")
        for m in ('model1', 'model2'):
            v = side(h[m], f"human row {i}, {m}")
            if (v['model_name'], v['response']) != (b[m]['model_name'], b[m]['response']):
                sys.exit(f"human row {i}, {m}: response differs from baseline_ragchecker.json")
        labels.setdefault(h['instance_id'], []).append({k: h[k] for k in ASPECTS})
    out = Path(__file__).resolve().parents[1]/'ragnb'/'data'/'ragchecker'/'meta_pairs.jsonl.gz'
    with gzip.GzipFile(out, 'wb', mtime=0) as f:   # mtime 0: the same input gives the same bytes
        for b in base:
            row = {k: b[k] for k in ('instance_id', 'dataset', 'query_id', 'query', 'gt_answer')}
            for m in ('model1', 'model2'):
                row[m] = {k: b[m][k] for k in ('model_name', 'response', 'ragchecker')}
            row['human'] = labels[b['instance_id']]
            f.write((json.dumps(row, ensure_ascii=False) + '\n').encode())
    print(f"{out}: {len(base)} pairs, {out.stat().st_size:,} bytes", file=sys.stderr)

if __name__ == '__main__': main()
