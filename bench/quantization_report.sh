#!/usr/bin/env bash
# Regenerates docs/quantization.md: for each precision of the embedded stories260K model (reference: its F32
# original) weight bytes, resident memory, prefill/decode speed, perplexity, KL divergence and top-1 agreement on
# the shared corpus; then the same table for a synthetic tinyllama-1.1b (reference: its F16 original) and the
# INT4-vs-INT8 decode comparison. ~35 minutes on 2 busy cores, most of it the 1.1B model's benchmarks.
#   usage: bench/quantization_report.sh [output.md]
#   env:   TESSERA_BIN (build/tessera), CORPUS, CTX (256), TINYLLAMA (1 = include the 1.1B tables), THREADS,
#          ROUNDS (2: rounds of the INT4-vs-INT8 decode comparison, best of)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TESSERA_BIN:-build/tessera}
CORPUS=${CORPUS:-../shared/corpus/stories260K-samples.txt}
CTX=${CTX:-256}
OUT=${1:-docs/quantization.md}
THREADS=${THREADS:-0}
ROUNDS=${ROUNDS:-2}
REF=models/stories260K.gguf
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
[ -x "$BIN" ] || { echo "missing $BIN: build first (scripts/build.sh)" >&2; exit 1; }
# Calibration (AWQ, GPTQ) never sees the evaluation text: the corpus's last fifth of lines calibrates, the rest is
# evaluated (tests/unit/quantization_quality_test.cpp splits it the same way).
N_LINES=$(wc -l < "$CORPUS")
N_EVAL=$((N_LINES - N_LINES / 5))
EVAL=$WORK/eval.txt
CALIB=$WORK/calibration.txt
head -n "$N_EVAL" "$CORPUS" > "$EVAL"
tail -n +"$((N_EVAL + 1))" "$CORPUS" > "$CALIB"
has_cmd() { "$BIN" --help 2>&1 | grep -qE "^\s+$1\b"; }
json() { python3 -c "import json,sys; d=json.load(open('$1')); print(eval('d'+sys.argv[1]))" "$2" 2>/dev/null || echo "n/a"; }

# Speed and memory of one model: `tessera bench` when present (prefill 128, decode batch 1 and 16, RSS),
# otherwise `tessera run` timings (decode at batch 1 only) and the peak RSS of that run. Extra arguments go to
# bench (e.g. --int8-threshold 6); the JSON stays in $WORK/bench.json.
speed() {  # model [bench args...] -> "prefill|decode1|decode16|rss_mb"
  local m=$1
  shift
  if has_cmd bench; then
    "$BIN" bench -m "$m" --quick --json -t "$THREADS" "$@" > "$WORK/bench.json" 2> /dev/null || true
    printf "%s|%s|%s|%s" "$(json "$WORK/bench.json" "['prefill_tokens_per_s']['128']")" \
      "$(json "$WORK/bench.json" "['decode_tokens_per_s']['1']")" \
      "$(json "$WORK/bench.json" "['decode_tokens_per_s']['16']")" \
      "$(json "$WORK/bench.json" "['rss_after_load_bytes']/1e6")"
  else
    /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" run -m "$m" -p "$(head -c 600 "$CORPUS")" -n 128 --temp 0 \
      --ignore-eos -t "$THREADS" > /dev/null 2> "$WORK/run.err" || true
    local pre dec
    pre=$(sed -n 's/^prompt:.*(\s*\([0-9.]*\) tokens\/s).*/\1/p' "$WORK/run.err")
    dec=$(sed -n 's/^generation:.*(\s*\([0-9.]*\) tokens\/s).*/\1/p' "$WORK/run.err")
    printf "%s|%s|%s|%s" "${pre:-n/a}" "${dec:-n/a}" "n/a" "$(awk '{printf "%.1f", $1/1024}' "$WORK/rss")"
  fi
}

quality() {  # model reference text ctx chunks [perplexity args...] -> json file path
  local m=$1 ref=$2 text=$3 ctx=$4 chunks=$5
  shift 5
  "$BIN" perplexity -m "$m" --ref "$ref" -f "$text" --ctx "$ctx" --chunks "$chunks" -t "$THREADS" --json "$@" \
    > "$WORK/ppl.json"
  echo "$WORK/ppl.json"
}

fmt() { python3 -c "import sys; v=sys.argv[1]; print(v if v=='n/a' else '%.${2}f' % float(v))" "$1"; }

percent() { python3 -c "print('%.2f %%' % (100*float('$1')))" 2>/dev/null || echo n/a; }

# One table row: quality against `ref` on `text` (ctx, chunks), speed from bench; extra arguments (the
# --int8-threshold option) go to both. The memory column is RSS after load for the small model, and the weights'
# resident bytes after a decode step for the large one (RSS_KEY).
row() {  # label model ref text ctx chunks [args...]
  local label=$1 m=$2 ref=$3 text=$4 ctx=$5 chunks=$6 q s
  shift 6
  echo "  $label" >&2
  q=$(quality "$m" "$ref" "$text" "$ctx" "$chunks" "$@")
  s=$(speed "$m" "$@")
  IFS='|' read -r pre dec1 dec16 rss <<< "$s"
  [ "${RSS_KEY:-}" = resident ] && rss=$(json "$WORK/bench.json" "['resident_weight_bytes']/1e6")
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$label" \
    "$(json "$q" "['weight_bytes']")" "$(fmt "$rss" 1)" "$(fmt "$pre" "${SPEED_DIGITS:-0}")" \
    "$(fmt "$dec1" "${SPEED_DIGITS:-0}")" "$(fmt "$dec16" "${SPEED_DIGITS:-0}")" \
    "$(fmt "$(json "$q" "['perplexity']")" 4)" "$(fmt "$(json "$q" "['ppl_ratio']")" 4)" \
    "$(fmt "$(json "$q" "['kl_mean']")" 5)" "$(fmt "$(json "$q" "['kl_p99']")" 4)" \
    "$(percent "$(json "$q" "['top1_agreement']")")"
}

quant() {  # name args... -> writes $WORK/name.gguf, keeps the tool's report
  local name=$1
  shift
  "$BIN" quantize -m "$SRC" -o "$WORK/$name.gguf" -q "$@" > "$WORK/$name.report"
}

echo "stories260K:" >&2
SRC=$REF
quant int8 --type int8
quant fp8 --type fp8
quant q8_0 --type q8_0
quant int4_g32_rtn --type int4 --group 32
quant int4_g32_awq --type int4 --group 32 --method awq --calibration "$CALIB"
quant int4_g32_awq_noclip --type int4 --group 32 --method awq --no-clip --calibration "$CALIB"
quant int4_g32_gptq --type int4 --group 32 --method gptq --calibration "$CALIB"
quant int4_g128_rtn --type int4 --group 128
quant int4_g128_awq --type int4 --group 128 --method awq --calibration "$CALIB"
quant int4_g128_gptq --type int4 --group 128 --method gptq --calibration "$CALIB"

HEADER="| precision | weight bytes | RSS MB | prefill tok/s | decode tok/s (b=1) | decode tok/s (b=16) | perplexity | ppl ratio | KL mean | KL p99 | top-1 agree |
|---|---|---|---|---|---|---|---|---|---|---|"
TESTS=${TESSERA_TESTS:-$(dirname "$BIN")/tests/tessera_tests}
{
  echo "# Quantization: measured quality and speed"
  echo
  echo "Generated by \`bench/quantization_report.sh\` on $(date -u +%Y-%m-%d) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, shared machine: speeds are noisy)."
  echo "Reference: the F32 model. Text: the first $N_EVAL of the $N_LINES lines of \`$(basename "$CORPUS")\`, non-overlapping windows of"
  echo "$CTX tokens (BOS + text). AWQ and GPTQ calibrate on the other $((N_LINES - N_EVAL)) lines (the last fifth), so they are not measured on"
  echo "text they have seen. KL is KL(reference ‖ model) of the next-token distribution in nats; top-1 agree is the fraction of"
  echo "positions whose argmax tokens agree. Speed columns come from \`tessera bench --quick -t $THREADS\` (0: all cores); on"
  echo "stories260K (64-wide layers, everything in L1) one step takes microseconds, so its speeds measure call overheads and"
  echo "the scheduling noise of the shared machine, not the formats."
  echo
  echo "## Formats and tools"
  echo
  echo "- INT8: per-output-channel symmetric int8 weights (I8 tensor + \`NAME.scale\` F32), per-token int8 activations (W8A8)."
  echo "  \`--int8-threshold T\` (run, serve, bench, perplexity; a load option, not stored in the file): LLM.int8()-style"
  echo "  outliers. Per token, activation columns with |x| > T are multiplied in fp32 with the dequantized weight column and"
  echo "  left out of the int8 part and of its scale. LLM.int8() picks outlier columns for the whole batch; here each token"
  echo "  picks its own, so a sequence's logits stay bit-identical alone or batched (\`src/kernels/int8_outliers.h\`)."
  echo "- FP8 E4M3: one byte per weight (I8 tensor of E4M3 bytes + \`NAME.scale\` F32, key \`tessera.quant.NAME.format\`);"
  echo "  weight-only, widened to fp32 in registers (E4M3 → fp16 by a shift, F16C → fp32, FMA)."
  echo "- INT4: nibbles in 32-value chunks + fp16 scale and zero point per group (\`NAME.scale\`, \`NAME.zero\`), groups of 32"
  echo "  or 128 with a shorter last group (\`src/kernels/lowbit.h\`). Kernels (\`src/kernels/matmul_int4_avx2.cpp\`): 32 packed"
  echo "  bytes → 64 unsigned bytes by AND and shift+AND, \`vpmaddubsw\` against per-token int8 activations stored in the"
  echo "  matching order, group sums in int16/int32 and fp32 FMAs with the group scales (group 32: per pair of groups,"
  echo "  \`vpmaddwd\` to int32 lanes, one conversion and one FMA, the lanes summed at the end; no horizontal adds), the"
  echo "  zero point as s·z·Σx per group from per-token group sums. Decode streams one row at a time with a prefetch one"
  echo "  row ahead; batches share each unpacked weight vector among 4 tokens."
  echo "- Calibration (\`--method awq|gptq --calibration TEXT\`) runs the fp32 model on the text. AWQ: per input channel"
  echo "  s = mean|x|^α on a grid of 21 α; for each α the layer's weights W·diag(s) are quantized with a per-group clipping"
  echo "  search (range [lo·ρ, hi·ρ], ρ from 1 down to 0.5, minimizing the group's output error δᵀH δ on the calibration"
  echo "  inputs) and the α with the least output error E‖x(W − Ŵ)ᵀ‖² over the calibration activations wins; 1/s is folded"
  echo "  into the preceding RMSNorm (q/k/v, gate/up), the V rows (attn_output, shared per KV channel) or the up rows (down)."
  echo "  \`--no-clip\`: round-to-nearest in the search and the result. GPTQ quantizes column by column with the"
  echo "  inverse-Hessian error update (damping 0.01 · mean diag)."
  echo "- Q8_0 / Q4_0 / Q4_K / Q6_K: standard GGUF blocks; rows the block does not divide fall back (reported) to Q8_0 or F16."
  echo
  echo "## stories260K (embedded model)"
  echo
  echo "$HEADER"
  S=("$REF" "$EVAL" "$CTX" 0)
  row "F32 (reference)" "$REF" "${S[@]}"
  row "INT8 W8A8 (per-channel)" "$WORK/int8.gguf" "${S[@]}"
  row "INT8 W8A8, --int8-threshold 6" "$WORK/int8.gguf" "${S[@]}" --int8-threshold 6
  row "FP8 E4M3 (per-channel, weight-only)" "$WORK/fp8.gguf" "${S[@]}"
  row "Q8_0 (GGUF)" "$WORK/q8_0.gguf" "${S[@]}"
  row "INT4 g32 RTN" "$WORK/int4_g32_rtn.gguf" "${S[@]}"
  row "INT4 g32 AWQ" "$WORK/int4_g32_awq.gguf" "${S[@]}"
  row "INT4 g32 AWQ --no-clip" "$WORK/int4_g32_awq_noclip.gguf" "${S[@]}"
  row "INT4 g32 GPTQ" "$WORK/int4_g32_gptq.gguf" "${S[@]}"
  row "INT4 g128 RTN" "$WORK/int4_g128_rtn.gguf" "${S[@]}"
  row "INT4 g128 AWQ" "$WORK/int4_g128_awq.gguf" "${S[@]}"
  row "INT4 g128 GPTQ" "$WORK/int4_g128_gptq.gguf" "${S[@]}"
  echo
  echo "What the tool reported for the INT4 g32 GPTQ model (rows 172 long: shorter last group) and Q8_0 (fallbacks):"
  echo
  echo '```'
  cat "$WORK/int4_g32_gptq.report" "$WORK/q8_0.report"
  echo '```'
  echo
  echo "Targets (issue 4): INT8 perplexity ≤ +1 % and top-1 ≥ 98 %; FP8 ≤ +2 %; calibrated INT4 g32 ≤ +5 % and better than"
  echo "RTN (AWQ and GPTQ both below RTN; GPTQ within 5 %). tests/unit/quantization_quality_test.cpp checks these on 16"
  echo "windows of the same evaluation text, with the same calibration text. The INT4-vs-INT8 decode targets are measured"
  echo "on TinyLlama below."
  echo
  echo "AWQ's per-layer choices (g32):"
  echo
  echo '```'
  grep '^awq' "$WORK/int4_g32_awq.report" || true
  echo '```'
  echo
  echo "## INT8 outliers (\`--int8-threshold\`)"
  echo
  echo "stories260K has almost no activations above 6 (its rows above barely move). Where outliers exist they matter:"
  echo "\`QuantizationQuality.Int8ThresholdRecoversInjectedOutlierChannels\` injects four outlier channels into stories260K"
  echo "without changing its fp32 function (RMSNorm gains ×40, the matching input columns of q/k/v and gate/up ÷40) and"
  echo "measures KL against the F32 model on 8 windows of 256:"
  echo
  echo '```'
  if [ -x "$TESTS" ]; then
    "$TESTS" --gtest_filter=QuantizationQuality.Int8ThresholdRecoversInjectedOutlierChannels 2>&1 | grep '^KL vs' || echo "(test output not found)"
  else
    echo "(no test binary at $TESTS)"
  fi
  echo '```'
  echo
  echo "The part the threshold does not remove is the weight side: the shrunk columns keep their row's int8 step and meet"
  echo "×40 activations (LLM.int8() also keeps those weight columns in fp16; Tessera's INT8 file has only int8 rows)."
  echo "\`tests/unit/kernel_int8_outliers_test.cpp\` checks the kernels against the scalar formula on odd sizes, bit-exact"
  echo "batch invariance with per-token outlier sets, and a ~10× drop of the matmul error on a matrix with outlier columns."
  echo
  echo "## KV cache precision (\`--kv-type\`, chosen at start)"
  echo
  echo "The same F32 weights, only the cache storage differs; reference: the F16 cache (the default). INT8 and FP8 keep"
  echo "one fp32 scale per token and KV head. Target (issue 4): INT8 KV perplexity within +1 % of F16 KV."
  echo
  echo "| KV cache | perplexity | ppl ratio vs F16 KV | KL mean | KL p99 | top-1 agree |"
  echo "|---|---|---|---|---|---|"
  for kv in f32 bf16 int8 fp8; do
    echo "  KV $kv" >&2
    q=$(quality "$REF" "$REF" "$EVAL" "$CTX" 0 --kv-type "$kv" --ref-kv-type f16)
    printf "| %s | %s | %s | %s | %s | %s |\n" "$kv" \
      "$(fmt "$(json "$q" "['perplexity']")" 4)" "$(fmt "$(json "$q" "['ppl_ratio']")" 4)" \
      "$(fmt "$(json "$q" "['kl_mean']")" 5)" "$(fmt "$(json "$q" "['kl_p99']")" 4)" \
      "$(percent "$(json "$q" "['top1_agreement']")")"
  done
} > "$WORK/report.md"

if [ "${TINYLLAMA:-1}" = 1 ] && has_cmd make-model; then
  echo "tinyllama-1.1b (synthetic):" >&2
  SRC=$WORK/tl_f16.gguf
  "$BIN" make-model --preset tinyllama-1.1b --type f16 -o "$SRC" --vocab-from "$REF" 2> /dev/null
  head -c 2000 "$EVAL" > "$WORK/short.txt"
  T=("$SRC" "$WORK/short.txt" 64 4)
  RSS_KEY=resident
  SPEED_DIGITS=1
  {
    echo
    echo "## tinyllama-1.1b (synthetic random weights, \`tessera make-model\`)"
    echo
    echo "Reference: the F16 model (\`make-model --preset tinyllama-1.1b --type f16 --vocab-from models/stories260K.gguf\`), quantized"
    echo "with \`tessera quantize --quantize-output\` (RTN: random weights have nothing to calibrate on), so every layer matrix and"
    echo "the output head are in the given type, as \`make-model --type\` writes them. Random weights make perplexity meaningless"
    echo "(near-flat distributions over 32000 tokens); KL and top-1 agreement are not, though top-1 on near-flat"
    echo "distributions flips easily. Text: the first 2000 bytes of the evaluation text, 4 windows of 64 tokens (252"
    echo "predictions; a short text keeps the 1.1B forward passes to a minute per row on 2 cores). \"Resident MB\" is the model"
    echo "file's resident mapping after one decode step (every weight read once)."
    echo
    echo "${HEADER/RSS MB/resident MB}"
    row "F16 (reference)" "$SRC" "${T[@]}"
  } >> "$WORK/report.md"
  for spec in "INT8:int8:--type int8" "INT8, --int8-threshold 6:int8_t6:--type int8" "FP8 E4M3:fp8:--type fp8" \
              "Q8_0:q8_0:--type q8_0" "INT4 g32 RTN:i4g32:--type int4 --group 32" "INT4 g128 RTN:i4g128:--type int4 --group 128"; do
    IFS=':' read -r label name args <<< "$spec"
    extra=()
    if [ "$name" = int8_t6 ]; then
      name=int8
      extra=(--int8-threshold 6)
    else
      # shellcheck disable=SC2086
      quant "$name" $args --quantize-output
    fi
    row "$label" "$WORK/$name.gguf" "${T[@]}" "${extra[@]}" >> "$WORK/report.md"
    case "$name" in
      int8 | i4g32 | i4g128) [ "${#extra[@]}" = 0 ] && cp "$WORK/bench.json" "$WORK/round1_$name.json" ;;
      *) rm -f "$WORK/$name.gguf" ;;
    esac
  done
  rm -f "$SRC"

  # INT4 vs INT8 decode: the table's run is round 1; more rounds interleave the three models, best of each.
  echo "  decode rounds" >&2
  for ((r = 2; r <= ROUNDS; ++r)); do
    for name in int8 i4g32 i4g128; do
      speed "$WORK/$name.gguf" > /dev/null
      cp "$WORK/bench.json" "$WORK/round${r}_$name.json"
    done
  done
  python3 - "$WORK" "$ROUNDS" >> "$WORK/report.md" << 'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def best(name, batch):
    vals = []
    for r in range(1, rounds + 1):
        try:
            vals.append(json.load(open(f"{work}/round{r}_{name}.json"))["decode_tokens_per_s"][batch])
        except (OSError, KeyError, ValueError):
            pass
    return max(vals) if vals else float("nan")
print()
print(f"### INT4 vs INT8 decode (tinyllama-1.1b, `tessera bench --quick`, best of {rounds} interleaved rounds)")
print()
print("| batch | INT8 tok/s | INT4 g32 tok/s | INT4 g128 tok/s | g32 / INT8 | g128 / INT8 | target |")
print("|---|---|---|---|---|---|---|")
for batch, target, label in (("1", 1.6, "≥ 1.6×"), ("16", 1.0, "≥ 1.0×")):
    i8, g32, g128 = best("int8", batch), best("i4g32", batch), best("i4g128", batch)
    verdict = lambda r: "met" if r >= target else "**not met**"
    print(f"| {batch} | {i8:.2f} | {g32:.2f} | {g128:.2f} | {g32 / i8:.2f}× ({verdict(g32 / i8)}) | "
          f"{g128 / i8:.2f}× ({verdict(g128 / i8)}) | {label} |")
def weight_bytes(name):
    return json.load(open(f"{work}/round1_{name}.json"))["weight_bytes_per_token"]
print()
print(f"Weights read per token, INT8 / INT4: g32 {weight_bytes('int8') / weight_bytes('i4g32'):.2f}×, "
      f"g128 {weight_bytes('int8') / weight_bytes('i4g128'):.2f}× (INT4 g32 spends 4 bytes of fp16 scale and zero")
print("point per 32 weights): the most a memory-bound batch-1 step can gain, so g32 meets 1.6× only when its kernel")
print("streams weights as fast as INT8's. On this shared 2-core machine one comparison moves by ±15 % from run to run,")
print("and the memory bandwidth itself drifts between rounds, so a best-of ratio can even pass the bytes ratio. The")
print("drift-free view: each run's weight bytes streamed per second at batch 1 as a share of the bandwidth that same run")
print("measured (`decode_bandwidth_ratio`), and the speedup those shares imply at equal bandwidth:")
print()
import statistics
def shares(name):
    out = []
    for r in range(1, rounds + 1):
        try:
            out.append(json.load(open(f"{work}/round{r}_{name}.json"))["decode_bandwidth_ratio"])
        except (OSError, KeyError, ValueError):
            pass
    return out
print("| model | share of bandwidth, batch 1 (each round) | median | INT4 / INT8 at equal bandwidth |")
print("|---|---|---|---|")
base = statistics.median(shares("int8") or [float("nan")])
for name, label in (("int8", "INT8"), ("i4g32", "INT4 g32"), ("i4g128", "INT4 g128")):
    sh = shares(name)
    med = statistics.median(sh) if sh else float("nan")
    implied = "" if name == "int8" else f"{med / base * weight_bytes('int8') / weight_bytes(name):.2f}×"
    print(f"| {label} | {', '.join(f'{100 * v:.0f} %' for v in sh)} | {100 * med:.0f} % | {implied} |")
PY
fi
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report.md" "$OUT"
echo "wrote $OUT" >&2
