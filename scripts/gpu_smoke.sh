#!/usr/bin/env bash
# One-rank NCCL + CUDA smoke test of the executor: several stages on one rank
# (same-rank handoffs, an I/W split, the NCCL handshake allreduce), each run
# compared with the unpipelined --reference. Needs a CUDA GPU, a CUDA LibTorch
# (e.g. pip torch; found through `python3 -c 'import torch'`), the CUDA
# toolkit (torch's CMake config looks for it), cmake, g++ and the Debian dev
# packages nlohmann-json3-dev libcli11-dev libspdlog-dev.
# Multi-rank NCCL needs one GPU per rank and is not covered here.
# Usage: scripts/gpu_smoke.sh   (env: PYTHON, PIPEPLAN_GPU_BUILD)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PIPEPLAN_GPU_BUILD:-$ROOT/build-gpu}"
PY="${PYTHON:-python3}"

TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpus", torch.cuda.device_count())'
# pip wheels keep nccl.h and the CUDA headers in the nvidia-* packages.
EXTRA_INC="$("$PY" - <<'EOF'
import os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = [os.path.join(r, d, "include") for r in roots for d in sorted(os.listdir(r))]
print(" ".join("-isystem " + d for d in dirs if os.path.isdir(d)))
EOF
)"

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPIPEPLAN_BUILD_TESTS=OFF \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="$EXTRA_INC"
cmake --build "$BUILD" --target pipeplan -j "$(nproc)"

status=0
for shape in "-s interleaved-1f1b -p 1 -m 4 -v 4" "-s zbv -p 1 -m 4"; do
  echo "== pipeplan train $shape --backend nccl --nproc 1"
  # shellcheck disable=SC2086
  "$BUILD/pipeplan" train $shape --backend nccl --nproc 1 --steps 3 --timeout 120 \
    | tee "$BUILD/smoke_nccl.txt"
  # shellcheck disable=SC2086
  "$BUILD/pipeplan" train $shape --backend nccl --reference --steps 3 > "$BUILD/smoke_ref.txt"
  if paste -d' ' "$BUILD/smoke_nccl.txt" "$BUILD/smoke_ref.txt" | awk '
      { d = $4 - $8; if (d < 0) d = -d; s = $8 < 0 ? -$8 : $8
        if (NF != 8 || d > 1e-5 * s) bad = 1; n++ }
      END { exit (bad || n != 3) }'; then
    echo "ok: equals the unpipelined reference within 1e-5"
  else
    echo "FAILED: differs from the reference:"; cat "$BUILD/smoke_ref.txt"; status=1
  fi
done
exit $status
