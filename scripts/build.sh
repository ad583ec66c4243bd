#!/usr/bin/env bash
# Configures and builds Tessera (Release by default) into build/ (or $TESSERA_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${TESSERA_BUILD_DIR:-build}"
build_type="${TESSERA_BUILD_TYPE:-Release}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "$@" >/dev/null
ninja -C "$build_dir"
