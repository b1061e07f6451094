#!/usr/bin/env bash
# Wall time and results labelled of `ragnb check` on RAGChecker's example against a local llama-cpp-python server
# (Qwen2.5-Coder-1.5B from ../shared/tools/local-llm.sh setup), with a fresh call cache each run (issue 25).
# Usage: bench/check_local.sh NAME PYTHONPATH "SERVER ARGS" [check options...]
#   bench/check_local.sh main /tmp/base ""                       # before: an extraction of main
#   bench/check_local.sh branch "$PWD" "--cache True"              # after, with the server's prompt cache
#   bench/check_local.sh off "$PWD" "--cache True" --no-prefix-order
set -u
name=$1; pp=$2; sargs=$3; shift 3
R=${BENCH_OUT:-/tmp/ragnb-check-local}; PORT=${PORT:-8091}; D=${LOCAL_LLM_DIR:-$HOME/.cache/ragnb-local-llm}
IN=$(python -c "from ragnb.core.samples import sample_path; print(sample_path('ragchecker', 'examples', 'checking_inputs.json'))")
mkdir -p "$R"; rm -rf "$R/$name"; mkdir -p "$R/$name"
"$D/venv/bin/python" -m llama_cpp.server --model "$D/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" --model_alias qwen \
  --host 127.0.0.1 --port $PORT --n_ctx 8192 --n_threads 2 $sargs > "$R/$name/server.log" 2>&1 &
SPID=$!; trap 'kill $SPID 2>/dev/null' EXIT
for i in $(seq 300); do curl -sf http://127.0.0.1:$PORT/v1/models >/dev/null && break; sleep 1; done
echo "$name: start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1 OPENAI_API_KEY=x RAGNB_MODEL=qwen RAGNB_CACHE_DIR="$R/$name/cache" PYTHONPATH="$pp" \
  python -c "import sys; from ragnb.app.cli import main; sys.exit(main(sys.argv[1:]))" check "$IN" --out "$R/$name/out.json" "$@" \
  > "$R/$name/stdout" 2> "$R/$name/stderr"
echo "$name: exit $?, $(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
python - "$R/$name/out.json" <<'PY'
import json, sys
try: rs = json.load(open(sys.argv[1]))['results']
except Exception as e: sys.exit(f"no output: {e}")
keys = ('answer2response', 'response2answer', 'retrieved2response', 'retrieved2answer')
print(f"{sum(all(r.get(k) is not None for k in keys) for r in rs)}/{len(rs)} results fully labelled")
PY
