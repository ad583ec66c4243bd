#!/usr/bin/env bash
# Regenerates the figures of docs/performance.md: writes random-weight models at a published shape with
# `tessera make-model`, runs `tessera bench` on each (machine limits and model throughput in the same run), and
# prints the Markdown tables. Models go to a scratch folder and are deleted after their run.
#
#   bench/run_performance.sh                      # tinyllama-1.1b: q8_0 int8 q4_0 f16, 2 threads
#   PRESET=qwen3-0.6b TYPES="q8_0 q4_k" THREADS=4 bench/run_performance.sh
#
# Environment: TESSERA_BUILD_DIR (default build), PRESET, TYPES, THREADS, SCRATCH (default /tmp/tessera-perf),
# KEEP_MODELS=1 to keep the GGUF files, QUICK=1 for a fast smoke run.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${TESSERA_BUILD_DIR:-build}
PRESET=${PRESET:-tinyllama-1.1b}
TYPES=${TYPES:-"q8_0 int8 q4_0 f16"}
THREADS=${THREADS:-2}
SCRATCH=${SCRATCH:-/tmp/tessera-perf}
SPM_VOCAB=../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf

if [[ ! -x "$BUILD/tessera" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$BUILD" tessera >/dev/null
TESSERA="$BUILD/tessera"
mkdir -p "$SCRATCH"

vocab_args=()
# TinyLlama uses the Llama-2 SentencePiece vocabulary: copy the real one when it is at hand.
if [[ "$PRESET" == tinyllama-1.1b && -f "$SPM_VOCAB" ]]; then vocab_args=(--vocab-from "$SPM_VOCAB"); fi
bench_args=(-t "$THREADS" --json)
if [[ "${QUICK:-0}" == 1 ]]; then bench_args+=(--quick); fi

for type in $TYPES; do
  model="$SCRATCH/$PRESET-$type.gguf"
  echo "== $PRESET $type" >&2
  "$TESSERA" make-model --preset "$PRESET" --type "$type" -o "$model" "${vocab_args[@]}"
  "$TESSERA" bench -m "$model" "${bench_args[@]}" >"$SCRATCH/$PRESET-$type.json"
  if [[ "${KEEP_MODELS:-0}" != 1 ]]; then rm -f "$model"; fi
done

python3 - "$SCRATCH" "$PRESET" $TYPES <<'PY'
import json, os, subprocess, sys

scratch, preset, types = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {t: json.load(open(os.path.join(scratch, f"{preset}-{t}.json"))) for t in types}

def lscpu(field):
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return "?"

mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
first = next(iter(runs.values()))
print(f"Machine: {lscpu('Model name')}, {lscpu('CPU(s)')} CPUs ({lscpu('Core(s) per socket')} cores per socket, "
      f"{lscpu('Thread(s) per core')} thread(s) per core), L3 {lscpu('L3 cache')}, {mem_gib:.0f} GiB RAM; "
      f"{first['isa']} kernels, {first['threads']} threads, KV cache {first['kv_type']}; "
      f"load average {os.getloadavg()[0]:.1f} at the end.\n")

gib = lambda b: b / 2**30
pct = lambda x: f"{100 * x:.0f}%"
print("| type | tensor bytes | bandwidth GB/s (before / after) | fp32 peak GFLOP/s | int8 peak GOP/s: best of 3 probes (lowest) "
      "| byte-product peak GOP/s | prefill 128 tok/s | prefill 512 tok/s | prefill / peak "
      "| decode b1 tok/s | decode / bandwidth | b4 | b16 | b32 tok/s | b16 / b1 | resident / tensor bytes |")
print("|" + "---|" * 16)
for t, r in runs.items():
    p, d = r["prefill_tokens_per_s"], r["decode_tokens_per_s"]
    print(f"| {r['type']} | {gib(r['file_tensor_bytes']):.2f} GiB "
          f"| {r['bandwidth_gbs']:.1f} ({r['bandwidth_before_gbs']:.1f} / {r['bandwidth_after_gbs']:.1f}) "
          f"| {r['fp32_peak_gflops']:.0f} | {r['int8_peak_gops']:.0f} (lowest {min(r['int8_peak_probes_gops']):.0f}) "
          f"| {r['int8_product_peak_gops']:.0f} "
          f"| {p['128']:.1f} | {p['512']:.1f} | {pct(r['prefill_peak_ratio'])} of {r['prefill_peak_kind']} "
          + (f"({pct(r['prefill_product_peak_ratio'])} of byte-product) " if r['prefill_peak_kind'] == 'int8' else "") +
          f"| {d['1']:.2f} | {pct(r['decode_bandwidth_ratio'])} "
          f"| {d['4']:.1f} | {d['16']:.1f} | {d['32']:.1f} | {r['batch16_speedup']:.1f}x "
          f"| {pct(r['resident_weight_ratio'])} |")

print("\n| target | " + " | ".join(r["type"] for r in runs.values()) + " |")
print("|---|" + "---|" * len(runs))
def row(name, f):
    print(f"| {name} | " + " | ".join(f(r) for r in runs.values()) + " |")
yes = lambda ok: "met" if ok else "**not met**"
pct1 = lambda x: f"{100 * x:.1f}%"
row("batch-1 decode >= 80% of bandwidth (70% F16)",
    lambda r: f"{pct1(r['decode_bandwidth_ratio'])}: {yes(r['targets']['decode_bandwidth'])}")
row("prefill 512 >= 50% of the int8 (integer types) or fp32 (F16) peak",
    lambda r: f"{pct1(r['prefill_peak_ratio'])} of {r['prefill_peak_kind']}: "
    + yes(r['prefill_peak_ratio'] >= 0.5))
row("batch-16 decode >= 5x batch-1",
    lambda r: f"{r['batch16_speedup']:.1f}x: {yes(r['targets']['batch16_speedup'])}")
row("batch-16 decode >= 60% of the roofline bound",
    lambda r: f"{pct(r['batch16_speedup'] / r['batch16_speedup_roofline_bound'])} of "
    f"{r['batch16_speedup_roofline_bound']:.1f}x: {yes(r['targets']['batch16_bound'])}")
row("resident weights <= tensor bytes + 5%",
    lambda r: f"{pct(r['resident_weight_ratio'])}: {yes(r['targets']['resident_weights'])}")
by_type = {r["type"]: r for r in runs.values()}
if "I8" in by_type and "F16" in by_type:
    ratio = by_type["I8"]["file_tensor_bytes"] / by_type["F16"]["file_tensor_bytes"]
    print(f"\nINT8 tensor bytes / F16 tensor bytes: {pct(ratio)} ({yes(ratio <= 0.53)}; target <= 53%)")
PY
