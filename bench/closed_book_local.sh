#!/usr/bin/env bash
# Issue 51: how many of the demo's kept questions the local model (Qwen2.5-Coder-1.5B) answers without their passage.
#   bench/closed_book_local.sh [OUT_DIR]      # ~2 min on 2 cores once `ragnb local install` is done
# The demo's test set is made from its shipped recording (no model); then `ragnb local serve` starts the local model
# and `ragnb inspect --model` asks each kept question alone (the closed-book check), through a fresh call cache.
set -euo pipefail
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
export RAGNB_GGUF=${RAGNB_GGUF:-$(python -c "from ragnb.app.local import find_gguf; print(find_gguf() or '')")}
export RAGNB_CACHE_DIR=$OUT/cache   # a fresh call cache (the model file is found above, in the user's cache)
env -u OPENAI_BASE_URL -u OPENAI_API_KEY ragnb demo --mode replayed --out "$OUT/demo" > "$OUT/demo.log" 2>&1
ragnb local serve > "$OUT/serve.out" 2> "$OUT/serve.err" &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q OPENAI_API_KEY= "$OUT/serve.out" 2>/dev/null && break; sleep 1; done
line=$(grep OPENAI_API_KEY= "$OUT/serve.out")
export $(echo "$line" | tr ' ' '\n' | grep -E '^(OPENAI_BASE_URL|OPENAI_API_KEY|RAGNB_MODEL)=')
/usr/bin/time -f "closed-book check: %e s, peak %M KB" ragnb inspect "$OUT/demo/dataset.jsonl" --model "$RAGNB_MODEL" \
  --out "$OUT/report.json" 2>&1 | grep -E "closed-book|answerable|will send"
python - "$OUT/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = {x['measure']: x for x in r['measures']}['answerable without the passage']
print(f"answerable without the passage: {m['value']} ({m['verdict']}): {m['finding']}")
PY
