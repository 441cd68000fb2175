#!/usr/bin/env bash
# The project's Python environment: a virtual environment with the pinned
# packages of scripts/oracles.txt (torch and the peers the interop tests use
# as oracles; every transitive package pinned by scripts/oracles.lock).
# It lives outside the clone, in a cache folder keyed by the pins and the
# interpreter, so a fresh clone (CI) finds it again:
#   ${PIPEPLAN_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/pipeplan}/venv-<key>
# Sourced by setup.sh (sets PIPEPLAN_VENV_PYTHON); run alone it prints the
# interpreter's path. `--relock` rewrites scripts/oracles.lock from it.
set -euo pipefail

_venv_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_venv_base="/usr/bin/python3"  # Debian's: the one python3-dev and pybind11 build for
[ -x "$_venv_base" ] || _venv_base="$(command -v python3)"
_venv_key="$( { cat "$_venv_root/scripts/oracles.txt" "$_venv_root/scripts/oracles.lock"; "$_venv_base" -VV; } |
  sha256sum | cut -c1-12)"
_venv_dir="${PIPEPLAN_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/pipeplan}/venv-$_venv_key"

if [ ! -f "$_venv_dir/.pipeplan-complete" ]; then
  mkdir -p "$(dirname "$_venv_dir")"
  # One installer at a time (two clones building at once share the folder).
  exec 9>"$_venv_dir.lock"
  flock 9
  if [ ! -f "$_venv_dir/.pipeplan-complete" ]; then
    echo "pipeplan setup: creating the Python environment $_venv_dir (pinned: scripts/oracles.txt)" >&2
    _venv_start=$(date +%s)
    rm -rf "$_venv_dir"
    "$_venv_base" -m venv "$_venv_dir" >&2
    # deepspeed's setup.py imports torch: torch first, then the rest without
    # build isolation (so the build sees the pinned torch).
    "$_venv_dir/bin/pip" install -q --disable-pip-version-check \
      -c "$_venv_root/scripts/oracles.lock" torch numpy >&2
    "$_venv_dir/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
      -c "$_venv_root/scripts/oracles.lock" -r "$_venv_root/scripts/oracles.txt" >&2
    _venv_size="$(du -sh "$_venv_dir" | cut -f1)"
    echo "pipeplan setup: Python environment ready in $(( $(date +%s) - _venv_start )) s, $_venv_size" >&2
    touch "$_venv_dir/.pipeplan-complete"
  fi
  exec 9>&-
fi
PIPEPLAN_VENV_PYTHON="$_venv_dir/bin/python"
export PIPEPLAN_VENV_PYTHON

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if [ "${1:-}" = "--relock" ]; then
    { echo "# pip freeze of the environment scripts/oracles.txt makes (constraints: every"
      echo "# transitive package pinned too). Regenerate: scripts/venv.sh --relock"
      "$_venv_dir/bin/pip" freeze --disable-pip-version-check | grep -v '@ file'; } > "$_venv_root/scripts/oracles.lock"
  fi
  echo "$PIPEPLAN_VENV_PYTHON"
fi
