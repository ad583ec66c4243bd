#!/usr/bin/env bash
# Serving benchmark: the same load (`tessera bench serve`, closed loop) against `tessera serve` and, when its
# binary is given, llama.cpp's llama-server on the same GGUF file, both on loopback; prints both results and
# the ratio of output tokens/s. Never downloads or builds anything: build/tessera must exist.
#
#   bench/run_serving.sh model.gguf                      # Tessera only
#   bench/run_serving.sh model.gguf ~/llama.cpp/build/bin/llama-server
#   CONCURRENCY=4 NUM_PROMPTS=32 bench/run_serving.sh model.gguf
#
# Environment: CONCURRENCY (16), NUM_PROMPTS (64), INPUT_LEN (128), OUTPUT_LEN (128), THREADS (2: llama-server's
# -t and tessera's -t), TOKEN_MAX (random prompt ids below min(30000, the model's vocabulary)),
# TESSERA_BUILD_DIR (build), TESSERA_ARGS / LLAMA_ARGS (extra server flags), OUT (folder for the JSON results;
# default a temporary one), STARTUP_TIMEOUT (seconds to wait for the server to be ready, 300).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 MODEL.gguf [LLAMA_SERVER_BINARY]" >&2
  exit 2
fi
MODEL=$1
LLAMA_SERVER=${2:-}
cd "$(dirname "$0")/.."
BUILD=${TESSERA_BUILD_DIR:-build}
TESSERA="$BUILD/tessera"
CONCURRENCY=${CONCURRENCY:-16}
NUM_PROMPTS=${NUM_PROMPTS:-64}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-128}
THREADS=${THREADS:-2}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-300}
OUT=${OUT:-$(mktemp -d /tmp/tessera-serving.XXXXXX)}
mkdir -p "$OUT"

die() { echo "run_serving: $*" >&2; exit 1; }
[[ -x "$TESSERA" ]] || die "$TESSERA not found: build it first (this script builds nothing)"
[[ -f "$MODEL" ]] || die "no model file '$MODEL'"
if [[ -n "$LLAMA_SERVER" && ! -x "$LLAMA_SERVER" ]]; then
  die "llama-server binary '$LLAMA_SERVER' is not executable"
fi
command -v curl >/dev/null || die "curl is needed to wait for the servers"
command -v python3 >/dev/null || die "python3 is needed for the summary"

# Random prompt ids must exist in the model's vocabulary.
vocab=$("$TESSERA" info -m "$MODEL" 2>/dev/null | grep -o 'vocab [0-9]*' | head -1 | cut -d' ' -f2 || true)
TOKEN_MAX=${TOKEN_MAX:-$(( ${vocab:-30000} < 30000 ? ${vocab:-30000} : 30000 ))}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT

# wait_ready PORT LOG PATH: until PATH answers 200, the server exits, or STARTUP_TIMEOUT passes. Tessera's /ready
# (its /health answers as soon as it listens; generation requests get 503 until the warm-up pass is done),
# llama-server's /health (200 once the model is loaded).
wait_ready() {
  local port=$1 log=$2 path=$3 deadline=$((SECONDS + STARTUP_TIMEOUT))
  until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port$path"; do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$log" >&2; die "the server exited before $path answered"; }
    (( SECONDS < deadline )) || { tail -n 20 "$log" >&2; die "no $path within ${STARTUP_TIMEOUT} s"; }
    sleep 0.5
  done
}

# run_load NAME PORT: the benchmark, JSON into $OUT/NAME.json (a failed request makes it exit non-zero, but its
# report is still kept and shown).
run_load() {
  local name=$1 port=$2 rc=0
  echo "== $name: $NUM_PROMPTS prompts, concurrency $CONCURRENCY, input $INPUT_LEN, output $OUTPUT_LEN" >&2
  "$TESSERA" bench serve --base-url "http://127.0.0.1:$port" --concurrency "$CONCURRENCY" \
    --num-prompts "$NUM_PROMPTS" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --token-max "$TOKEN_MAX" \
    --label "$name" --json >"$OUT/$name.json" || rc=$?
  if (( rc != 0 )); then echo "run_serving: $name: bench serve exited with $rc" >&2; fi
}

port=$(free_port)
# shellcheck disable=SC2086  # TESSERA_ARGS is a list of flags
"$TESSERA" serve -m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" --no-result-cache \
  ${TESSERA_ARGS:-} >"$OUT/tessera-serve.log" 2>&1 &
SERVER_PID=$!
wait_ready "$port" "$OUT/tessera-serve.log" /ready
run_load tessera "$port"
stop_server

names=(tessera)
if [[ -n "$LLAMA_SERVER" ]]; then
  port=$(free_port)
  # Twice what the slots' requests need: with exactly that much, llama-server (build of Feb 2025) filled its KV
  # cache mid-run and failed 16 of 64 requests (its `error:` stream lines; bench serve counts them as failed).
  ctx=$((2 * CONCURRENCY * (INPUT_LEN + OUTPUT_LEN + 16)))
  # shellcheck disable=SC2086
  "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -np "$CONCURRENCY" -c "$ctx" -t "$THREADS" \
    ${LLAMA_ARGS:-} >"$OUT/llama-server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready "$port" "$OUT/llama-server.log" /health
  run_load llama-server "$port"
  stop_server
  names+=(llama-server)
fi

python3 - "$OUT" "${names[@]}" <<'PY'
import json, os, sys

out, names = sys.argv[1], sys.argv[2:]
runs = {}
for n in names:
    try:
        runs[n] = json.load(open(os.path.join(out, f"{n}.json")))
    except (OSError, ValueError) as e:
        print(f"{n}: no result ({e})", file=sys.stderr)
rows = [("completed", lambda j: f"{j['completed']}/{j['num_prompts']}"),
        ("duration s", lambda j: f"{j['duration_s']:.2f}"),
        ("requests/s", lambda j: f"{j['request_throughput']:.2f}"),
        ("output tok/s", lambda j: f"{j['output_throughput']:.1f}"),
        ("total tok/s", lambda j: f"{j['total_token_throughput']:.1f}"),
        ("TTFT median ms", lambda j: f"{j['ttft_ms']['median'] or 0:.1f}"),
        ("TTFT p99 ms", lambda j: f"{j['ttft_ms']['p99'] or 0:.1f}"),
        ("TPOT median ms", lambda j: f"{j['tpot_ms']['median'] or 0:.2f}"),
        ("ITL p99 ms", lambda j: f"{j['itl_ms']['p99'] or 0:.2f}"),
        ("E2E median ms", lambda j: f"{j['e2e_ms']['median'] or 0:.1f}"),
        ("mean in/out tokens", lambda j: f"{j['mean_input_tokens']:.0f}/{j['mean_output_tokens']:.0f}")]
cols = list(runs)
print(f"\n| {'':<20} | " + " | ".join(f"{c:>14}" for c in cols) + " |")
print("|" + "-" * 22 + "|" + "|".join("-" * 16 for _ in cols) + "|")
for label, f in rows:
    print(f"| {label:<20} | " + " | ".join(f"{f(runs[c]):>14}" for c in cols) + " |")
failed = [n for n, j in runs.items() if j["failed"] > 0] + [n for n in names if n not in runs]
if "tessera" in runs and "llama-server" in runs and runs["llama-server"]["output_throughput"] > 0:
    if failed:
        # Failed requests stop early, so the two rates would not count the same work.
        print(f"\nno ratio: requests failed on {', '.join(failed)} (first error: "
              f"{next((runs[n].get('first_error', '') for n in failed if n in runs), '')})")
    else:
        ratio = runs["tessera"]["output_throughput"] / runs["llama-server"]["output_throughput"]
        print(f"\noutput tok/s, Tessera / llama-server: {ratio:.2f}x")
print(f"\nJSON results and server logs: {out}")
sys.exit(1 if failed else 0)
PY
