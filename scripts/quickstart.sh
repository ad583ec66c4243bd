#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install packages, build Release, and serve the embedded default
# model with the OpenAI-compatible API on http://127.0.0.1:8080 (Ctrl-C drains and exits).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
exec ./build/tessera serve --host 127.0.0.1 --port "${TESSERA_PORT:-8080}" "$@"
