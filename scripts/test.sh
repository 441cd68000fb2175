#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test via ctest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$PIPEPLAN_BUILD"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
