#!/usr/bin/env bash
# Installs what is missing, builds, and runs the pipeplan CLI with the given
# arguments. With no arguments: plan, verify and show 1f1b pp=4 m=8.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "$PIPEPLAN_BUILD/pipeplan" "$@"
