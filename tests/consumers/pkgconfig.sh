#!/usr/bin/env bash
# Builds tests/consumers/core/main.cc with only pkg-config's flags for the
# installed pipeplan.pc, then runs it. Usage: pkgconfig.sh PREFIX WORKDIR CXX
set -euo pipefail
prefix="$1" work="$2" cxx="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$work"
pc_dir="$(dirname "$(find "$prefix" -name pipeplan.pc -print -quit)")"
export PKG_CONFIG_PATH="$pc_dir"
flags="$(pkg-config --cflags --libs pipeplan)"
echo "pkg-config --cflags --libs pipeplan: $flags"
# shellcheck disable=SC2086  # the flags are words
"$cxx" -o "$work/consumer_pkgconfig" "$here/core/main.cc" $flags
"$work/consumer_pkgconfig"
