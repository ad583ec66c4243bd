#!/usr/bin/env bash
# Installs the Debian packages Tessera needs to build and test. Idempotent: packages already present are skipped.
# --build-only: just what building the `tessera` binary needs (the container build, deploy/container).
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libboost-dev prometheus-cpp-dev
)
test_packages=(
  curl python3
  python3-jinja2  # the reference the chat-template interpreter is tested against (tests/tools/render_chat_template.py)
  libgtest-dev libgmock-dev libbenchmark-dev
  libsimde-dev  # SIMDe: the AVX-512 kernels emulated on AVX2 for the kernel tests (tests/avx512_emulation)
  clang libclang-rt-14-dev
  prometheus  # promtool and a real Prometheus server for the /metrics and fleet end-to-end tests
  nginx       # the load balancer of the fleet tests (deploy/nginx), started by the tests as a plain process
  libdnnl-dev # oneDNN, for bench/onednn_compare only (optional: the build skips that benchmark without it)
  ocl-icd-opencl-dev  # OpenCL headers and loader: Debian's oneDNN CMake config requires them (GPU runtime OpenCL)
)

case "${1:-}" in
  --build-only) packages=("${build_packages[@]}") ;;
  "")
    packages=("${build_packages[@]}" "${test_packages[@]}")
    # Node.js and npm drive the end-to-end tests (the official `openai` client); keep a Node that is already there.
    command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
    # kubectl renders deploy/k8s offline (kubectl kustomize); keep one that is already there.
    command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
    ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

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
# RUNLEVEL=1: the packages' scripts do not start their services (nginx, prometheus); the tests start their own.
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
