#!/usr/bin/env bash
# Shared by run.sh and test.sh: install missing Debian packages, then
# configure and build into build/ (incremental). Not meant to be run alone.
set -euo pipefail

PIPEPLAN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIPEPLAN_BUILD="${PIPEPLAN_BUILD:-$PIPEPLAN_ROOT/build}"

packages=(cmake g++ make pkg-config nlohmann-json3-dev libcli11-dev libspdlog-dev catch2 zlib1g-dev)
# ccache: a fresh clone (CI) rebuilds from the machine's compiler cache.
packages+=(ccache)
# The Python module (pybind11) and its pytest suite.
packages+=(python3-dev python3-pybind11 python3-pytest)
# The executor needs LibTorch with c10d Gloo; the oracle tests the project's
# Python environment (scripts/venv.sh, python3-venv). PIPEPLAN_NO_TORCH=1
# skips both (the core needs no torch).
if [ "${PIPEPLAN_NO_TORCH:-0}" != "1" ]; then
  packages+=(libtorch-dev libgloo-dev python3-venv)
fi
# CI (CI=true) also runs scripts/sanitize.sh: clang with compiler-rt's
# libFuzzer. Elsewhere they are optional (PIPEPLAN_FUZZ_TOOLS=1 installs them).
if [ "${CI:-}" = "true" ] || [ "${PIPEPLAN_FUZZ_TOOLS:-0}" = "1" ]; then
  packages+=(clang libclang-rt-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pipeplan setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >&2
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

jobs="$(nproc 2>/dev/null || echo 2)"
cmake_args=(-S "$PIPEPLAN_ROOT" -B "$PIPEPLAN_BUILD" -DCMAKE_BUILD_TYPE=Release)
if [ "${PIPEPLAN_NO_TORCH:-0}" = "1" ]; then
  cmake_args+=(-DPIPEPLAN_WITH_TORCH=OFF)
else
  # torch, torchtitan, Megatron-Core and DeepSpeed: the oracle tests' Python
  # environment. (The executor still builds against Debian's LibTorch; moving
  # it to the pinned PyPI torch, C++20, is the open part of issue 35.)
  source "$PIPEPLAN_ROOT/scripts/venv.sh"
  cmake_args+=(-DPIPEPLAN_ORACLE_PYTHON="$PIPEPLAN_VENV_PYTHON")
fi
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths under the clone hashed as relative ones: another clone hits too.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PIPEPLAN_ROOT}"
fi
# Configured once; again when the Python environment changed (new pins).
if [ ! -f "$PIPEPLAN_BUILD/CMakeCache.txt" ] ||
   ! grep -qxF "PIPEPLAN_ORACLE_PYTHON:FILEPATH=${PIPEPLAN_VENV_PYTHON:-}" "$PIPEPLAN_BUILD/CMakeCache.txt"; then
  cmake "${cmake_args[@]}" >&2
fi
# Quiet when nothing fails: the build log is kept, and shown on failure.
log="$PIPEPLAN_BUILD/build.log"
if ! cmake --build "$PIPEPLAN_BUILD" -j "$jobs" > "$log" 2>&1; then
  cat "$log" >&2
  echo "pipeplan setup: the build failed (log: $log)" >&2
  exit 1
fi
