#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install packages, build Release, run the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
exec ./build/tessera run -p "Once upon a time" -n 200 "$@"
