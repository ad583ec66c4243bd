#!/usr/bin/env bash
# Builds the GGUF fuzzer (clang, libFuzzer, ASan, UBSan) and runs it for N seconds (default 30) on a scratch copy of
# fuzz/corpus/gguf, so the checked-in seeds stay small. Exits non-zero when the fuzzer finds a crash; the
# reproducer is left as crash-* in the work directory it prints. Usage: fuzz/run.sh [seconds] [extra libFuzzer flags]
# TESSERA_FUZZ_TARGET=gguf_roundtrip_fuzzer runs the reader -> writer -> reader target instead of gguf_fuzzer;
# TESSERA_FUZZ_TARGET=safetensors_fuzzer the safetensors reader (seeds in fuzz/corpus/safetensors).
# TESSERA_FUZZ_TARGET=grammar_fuzzer the structured-output compilers and matcher (seeds in fuzz/corpus/grammar).
# TESSERA_FUZZ_TARGET=chat_template_fuzzer the chat-template interpreter (seeds in fuzz/corpus/chat_template and
# ../shared/chat-templates, with fuzz/chat_template.dict; add -max_len=8192 to keep the longest templates whole).
set -euo pipefail

seconds="${1:-30}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_FUZZ_BUILD_DIR:-$root/build-fuzz}"
[[ "$build" == /* ]] || build="$PWD/$build"  # the fuzzer runs from its work directory
jobs="${TESSERA_FUZZ_BUILD_JOBS:-2}"
target="${TESSERA_FUZZ_TARGET:-gguf_fuzzer}"

if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_BUILD_TESTS=OFF >/dev/null
fi
ninja -C "$build" -j "$jobs" "$target" >/dev/null

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz.XXXXXX")"
mkdir -p "$work/corpus" "$work/artifacts"
corpus="gguf"
[[ "$target" == safetensors_* ]] && corpus="safetensors"
[[ "$target" == grammar_fuzzer ]] && corpus="grammar"
[[ "$target" == chat_template_* ]] && corpus="chat_template"
cp "$root"/fuzz/corpus/$corpus/* "$work/corpus/"
# The real chat templates shipped beside the repository (../shared/chat-templates) seed the interpreter too.
if [[ "$corpus" == chat_template ]] && compgen -G "$root/../shared/chat-templates/*.jinja" >/dev/null; then
  cp "$root"/../shared/chat-templates/*.jinja "$work/corpus/"
fi
dict=()
[[ -f "$root/fuzz/$corpus.dict" ]] && dict=(-dict="$root/fuzz/$corpus.dict")
echo "running $target for ${seconds}s in $work" >&2

status=0
(cd "$work" && "$build/fuzz/$target" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/artifacts/" ${dict[@]+"${dict[@]}"} "$@" "$work/corpus") || status=$?

if compgen -G "$work/artifacts/*" >/dev/null; then
  echo "fuzzer found problems; reproducers in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  exit $((status == 0 ? 1 : status))
fi
if [[ $status -ne 0 ]]; then
  echo "fuzzer exited with status $status" >&2
  exit "$status"
fi
rm -rf "$work"
echo "no crashes" >&2
