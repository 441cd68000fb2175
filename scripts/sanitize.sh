#!/usr/bin/env bash
# The hardening jobs CI runs after scripts/test.sh (docs/robustness.md):
# 1. the core (no LibTorch) built with AddressSanitizer + UndefinedBehavior-
#    Sanitizer, and every core test run under them (any report fails);
# 2. with clang's libFuzzer available, the fuzz targets in the same build,
#    each fuzzed for PIPEPLAN_FUZZ_SECONDS (default 25) from its seeds.
# Build dir: build-sanitize (PIPEPLAN_SANITIZE_BUILD overrides). The Python
# module (a sanitized .so cannot load into a plain interpreter) and the
# install consumers (built without the sanitizer runtime) are left out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PIPEPLAN_SANITIZE_BUILD:-$root/build-sanitize}"
jobs="$(nproc 2>/dev/null || echo 2)"

# clang + compiler-rt's libFuzzer: installed in CI, optional elsewhere.
cxx=g++
fuzz=OFF
if command -v clang++ >/dev/null 2>&1 &&
   ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  cxx=clang++
  fuzz=ON
else
  echo "pipeplan sanitize: clang with libFuzzer not found; sanitizer build with g++, no fuzzing" >&2
fi

start=$(date +%s)
if [ ! -f "$build/CMakeCache.txt" ]; then
  CXX="$cxx" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPIPEPLAN_WITH_TORCH=OFF -DPIPEPLAN_WITH_PYTHON=OFF -DPIPEPLAN_INSTALL=OFF \
    -DPIPEPLAN_SANITIZE=ON -DPIPEPLAN_FUZZ="$fuzz" >&2
fi
log="$build/build.log"
if ! cmake --build "$build" -j "$jobs" > "$log" 2>&1; then
  cat "$log" >&2
  echo "pipeplan sanitize: the sanitizer build failed (log: $log)" >&2
  exit 1
fi
built=$(date +%s)
echo "pipeplan sanitize: ASan+UBSan build ($cxx) took $((built - start)) s" >&2

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Left out under the sanitizers (they run in every plain build): the two
# longest core tests, a minute each under ASan+UBSan and a fifth of the
# suite's time there, which recompute what faster tests already cover (the
# exact order search over a whole grid of shapes; every lowering's table of
# the benchmark). PIPEPLAN_SANITIZE_EXCLUDE overrides the regex ('' runs all).
exclude="${PIPEPLAN_SANITIZE_EXCLUDE-no shape of the grid is above the exact optimum|--latency tables each lowering}"
(cd "$build" && ctest --output-on-failure -j "$jobs" ${exclude:+-E "$exclude"})
tested=$(date +%s)
echo "pipeplan sanitize: core tests under ASan+UBSan took $((tested - built)) s" >&2

if [ "$fuzz" = ON ]; then
  bash "$root/scripts/fuzz.sh" "$build"
  echo "pipeplan sanitize: fuzzing took $(( $(date +%s) - tested )) s" >&2
fi
