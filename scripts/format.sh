#!/usr/bin/env bash
# Formats pipeplan's C++ sources with .clang-format (clang-format from the
# Debian package clang-format). Usage:
#   scripts/format.sh            rewrite every tracked .cc/.h in place
#   scripts/format.sh --check    list the files that would change; exit 1 if any
#   scripts/format.sh FILE...    format just these files
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" > /dev/null; then
  echo "format.sh: $clang_format not found (apt-get install clang-format)" >&2
  exit 2
fi
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cpp' '*.hpp')
fi
if [ "$check" = 1 ]; then
  changed=0
  for f in "${files[@]}"; do
    if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then
      echo "$f"
      changed=1
    fi
  done
  exit "$changed"
fi
"$clang_format" --style=file -i "${files[@]}"
