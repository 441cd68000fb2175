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
# The executor builds against the pinned PyPI torch of the project's Python
# environment (scripts/venv.sh, python3-venv), which also runs the oracle
# tests; PyPI's LibTorch carries Gloo but not Gloo's headers (libgloo-dev,
# headers only). PIPEPLAN_NO_TORCH=1 skips all of it (the core needs no torch).
if [ "${PIPEPLAN_NO_TORCH:-0}" != "1" ]; then
  packages+=(libgloo-dev python3-venv)
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
  # environment; its torch is the LibTorch the executor builds against.
  source "$PIPEPLAN_ROOT/scripts/venv.sh"
  # Both package folders named: a Debian libtorch-dev on the machine would
  # otherwise supply Caffe2's.
  # The package's own folder first on the prefix path: its lib/ holds the
  # libraries (libtorch.so, libc10.so) TorchConfig looks up by name.
  torch_prefix="$("$PIPEPLAN_VENV_PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  torch_root="$("$PIPEPLAN_VENV_PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
  torch_dir="$torch_prefix/Torch"
  cmake_args+=(-DPIPEPLAN_ORACLE_PYTHON="$PIPEPLAN_VENV_PYTHON" -DCMAKE_PREFIX_PATH="$torch_root;$torch_prefix"
               -DTorch_DIR="$torch_dir" -DCaffe2_DIR="$torch_prefix/Caffe2")
  # PyPI's torch is a CUDA build: its CMake package needs the CUDA toolkit,
  # and with it the executor's NCCL paths compile and link (nothing runs them
  # without a GPU).
  cuda_root="${CUDA_HOME:-/usr/local/cuda}"
  if [ -x "$cuda_root/bin/nvcc" ]; then
    cmake_args+=(-DCUDAToolkit_ROOT="$cuda_root")
  fi
fi
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths under the clone hashed as relative ones: another clone hits too.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PIPEPLAN_ROOT}"
fi
# Configured once; afresh when the Python environment changed (new pins, so
# a new LibTorch, whose libraries CMake has cached by path).
cache="$PIPEPLAN_BUILD/CMakeCache.txt"
if [ -f "$cache" ] &&
   { ! grep -qxF "PIPEPLAN_ORACLE_PYTHON:FILEPATH=${PIPEPLAN_VENV_PYTHON:-}" "$cache" ||
     { [ -n "${torch_dir:-}" ] && ! grep -qE "^Torch_DIR:[A-Z]+=$torch_dir\$" "$cache"; }; }; then
  rm -f "$cache"
fi
if [ ! -f "$cache" ]; then
  cmake "${cmake_args[@]}" >&2
fi
# Quiet when nothing fails: the build log is kept, and shown on failure.
log="$PIPEPLAN_BUILD/build.log"
if ! cmake --build "$PIPEPLAN_BUILD" -j "$jobs" > "$log" 2>&1; then
  cat "$log" >&2
  echo "pipeplan setup: the build failed (log: $log)" >&2
  exit 1
fi
