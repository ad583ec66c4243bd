#!/usr/bin/env bash
# Installs the Debian packages Tessera needs to build and test. Idempotent: packages already present are skipped.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates python3
  python3-jinja2  # the reference the chat-template interpreter is tested against (tests/tools/render_chat_template.py)
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libboost-dev prometheus-cpp-dev
  clang libclang-rt-14-dev
  prometheus  # promtool and a real Prometheus server for the /metrics end-to-end test
)
# Node.js and npm drive the end-to-end tests (the official `openai` client); keep a Node that is already there.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
