#!/usr/bin/env bash
# One-rank NCCL + CUDA smoke test of the executor: several stages on one rank
# (same-rank handoffs, an I/W split, the NCCL handshake allreduce), the memory
# actions (RECOMPUTE with its RNG replay; OFFLOAD/RELOAD through pinned host
# memory and the side copy stream) and forward-only evaluation, each run
# compared with the unpipelined --reference. Needs a CUDA GPU, a CUDA LibTorch
# (e.g. pip torch; found through `python3 -c 'import torch'`), the CUDA
# toolkit (torch's CMake config looks for it), cmake, g++ and the Debian dev
# packages nlohmann-json3-dev libcli11-dev libspdlog-dev.
# Multi-rank NCCL needs one GPU per rank and is not covered here.
#
# Usage: scripts/gpu_smoke.sh   (env: PYTHON, PIPEPLAN_GPU_BUILD)
#        PIPEPLAN_SMOKE_CPU=1 PIPEPLAN_SMOKE_BIN=build/pipeplan scripts/gpu_smoke.sh
#   runs the same cases on Gloo with an existing build (no GPU, no build), so
#   the script itself is tested where no GPU is (ctest gpu_smoke_cpu_mode).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PIPEPLAN_GPU_BUILD:-$ROOT/build-gpu}"
PY="${PYTHON:-python3}"

if [[ "${PIPEPLAN_SMOKE_CPU:-0}" == 1 ]]; then
  BIN="${PIPEPLAN_SMOKE_BIN:?PIPEPLAN_SMOKE_CPU=1 needs PIPEPLAN_SMOKE_BIN (a built pipeplan)}"
  BACKEND=gloo
  OUTDIR="$(mktemp -d)"
  trap 'rm -rf "$OUTDIR"' EXIT
else
  TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  # The package's own folder too: TorchConfig finds libtorch.so by name.
  TORCH_ROOT="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpus", torch.cuda.device_count())'
  # pip wheels keep nccl.h and the CUDA headers in the nvidia-* packages.
  EXTRA_INC="$("$PY" - <<'PYEOF'
import os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = [os.path.join(r, d, "include") for r in roots for d in sorted(os.listdir(r))]
print(" ".join("-isystem " + d for d in dirs if os.path.isdir(d)))
PYEOF
)"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPIPEPLAN_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$TORCH_ROOT;$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="$EXTRA_INC"
  cmake --build "$BUILD" --target pipeplan -j "$(nproc)"
  BIN="$BUILD/pipeplan"
  BACKEND=nccl
  OUTDIR="$BUILD"
fi

# Each case: the plan's options, then the run's own (memory actions, mode).
cases=(
  "-s interleaved-1f1b -p 1 -m 4 -v 4"
  "-s zbv -p 1 -m 4"
  "-s interleaved-1f1b -p 1 -m 4 -v 3 --recompute all"
  "-s zbv -p 1 -m 4 --recompute 0"
  "-s interleaved-1f1b -p 1 -m 4 -v 2 --offload all"
  "-s zbv -p 1 -m 4 --offload all --offload-lead 2"
  "-s interleaved-1f1b -p 1 -m 4 -v 2 --forward-only"
)

status=0
for shape in "${cases[@]}"; do
  echo "== pipeplan train $shape --backend $BACKEND --nproc 1"
  # shellcheck disable=SC2086
  if ! "$BIN" train $shape --backend "$BACKEND" --nproc 1 --steps 3 --timeout 120 \
      > "$OUTDIR/smoke_run.txt"; then
    echo "FAILED: the run exited non-zero (its stderr is above):"; cat "$OUTDIR/smoke_run.txt"
    status=1; continue
  fi
  cat "$OUTDIR/smoke_run.txt"
  # shellcheck disable=SC2086
  "$BIN" train $shape --reference --steps 3 > "$OUTDIR/smoke_ref.txt"
  if paste -d' ' "$OUTDIR/smoke_run.txt" "$OUTDIR/smoke_ref.txt" | awk '
      { d = $4 - $8; if (d < 0) d = -d; s = $8 < 0 ? -$8 : $8
        if (NF != 8 || d > 1e-5 * s) bad = 1; n++ }
      END { exit (bad || n != 3) }'; then
    echo "ok: equals the unpipelined reference within 1e-5"
  else
    echo "FAILED: differs from the reference:"; cat "$OUTDIR/smoke_ref.txt"; status=1
  fi
done
exit $status
