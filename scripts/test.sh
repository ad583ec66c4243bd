#!/usr/bin/env bash
# Builds everything and runs the whole test suite: a short fuzz run of the GGUF parser, then every CTest test
# (unit, golden, end-to-end). ctest runs last so its summary closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
if [ -x fuzz/run.sh ]; then
  fuzz/run.sh "${TESSERA_FUZZ_SECONDS:-30}"
fi
ctest --test-dir "${TESSERA_BUILD_DIR:-build}" --output-on-failure -j2 --timeout 600
