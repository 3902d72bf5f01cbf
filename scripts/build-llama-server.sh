#!/usr/bin/env bash
# Builds llama.cpp's llama-server once per machine, into a cache outside the repository, for the
# llama-server integration test (test/llamacpp-real.test.ts). No Debian package exists; the npm
# package node-llama-cpp carries llama.cpp's full source as a git bundle (llama/gitRelease.bundle),
# so `npm pack` fetches that tarball alone (no install, no scripts run).
#
# Idempotent: exits 0 at once (printing the binary's path) when the binary is already built.
# Needs cmake, a C++ compiler and git. About 12 minutes on 2 cores.
#
#   LLAMA_SERVER_CACHE  cache dir (default ~/.cache/switchyard/llama-server-<version>)
#   LLAMA_BUILD_JOBS    parallel build jobs (default 2)
set -euo pipefail

NODE_LLAMA_CPP_VERSION="3.21.1"
CACHE_DIR="${LLAMA_SERVER_CACHE:-${HOME}/.cache/switchyard/llama-server-${NODE_LLAMA_CPP_VERSION}}"
BIN="${CACHE_DIR}/bin/llama-server"
JOBS="${LLAMA_BUILD_JOBS:-2}"

if [[ -x "${BIN}" ]]; then
  echo "${BIN}"
  exit 0
fi

for tool in cmake git npm tar; do
  command -v "${tool}" >/dev/null 2>&1 || { echo "build-llama-server: '${tool}' is required" >&2; exit 1; }
done
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || {
  echo "build-llama-server: a C++ compiler (g++) is required" >&2; exit 1; }

mkdir -p "${CACHE_DIR}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT

start=$(date +%s)
echo "build-llama-server: fetching node-llama-cpp@${NODE_LLAMA_CPP_VERSION} (source bundle) into ${WORK}" >&2
(cd "${WORK}" && npm pack --silent "node-llama-cpp@${NODE_LLAMA_CPP_VERSION}" >/dev/null)
tar -xzf "${WORK}/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}.tgz" -C "${WORK}" package/llama/gitRelease.bundle
git -c advice.detachedHead=false clone --quiet "${WORK}/package/llama/gitRelease.bundle" "${WORK}/llama.cpp"
rm -f "${WORK}/node-llama-cpp-${NODE_LLAMA_CPP_VERSION}.tgz"

cd "${WORK}/llama.cpp"
echo "build-llama-server: llama.cpp $(git describe --tags --always 2>/dev/null || git rev-parse --short HEAD)" >&2
nice -n 10 cmake -S . -B build \
  -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DBUILD_SHARED_LIBS=OFF >&2
nice -n 10 cmake --build build --config Release --target llama-server -j"${JOBS}" >&2

mkdir -p "${CACHE_DIR}/bin"
# Copy to a temporary name first so an interrupted copy never leaves a half-written binary behind.
cp build/bin/llama-server "${BIN}.tmp"
chmod +x "${BIN}.tmp"
mv "${BIN}.tmp" "${BIN}"
git rev-parse HEAD > "${CACHE_DIR}/llama.cpp-commit"
echo "build-llama-server: built in $(( $(date +%s) - start ))s" >&2
echo "${BIN}"
