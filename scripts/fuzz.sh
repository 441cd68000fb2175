#!/usr/bin/env bash
# Fuzzes each libFuzzer target of a PIPEPLAN_FUZZ=ON build for
# PIPEPLAN_FUZZ_SECONDS (default 25) from its seeds; a crash, leak, sanitizer
# report or failed property stops with the input saved under
# $build/fuzz-artifacts. Usage: scripts/fuzz.sh BUILD_DIR [TARGET...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:?usage: scripts/fuzz.sh BUILD_DIR [TARGET...]}"
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_json fuzz_csv fuzz_action fuzz_verify fuzz_trace
  fuzz_stage_costs fuzz_layers fuzz_cost_spec fuzz_torch_trace
  fuzz_megatron_layout fuzz_cell fuzz_stage_set)
seconds="${PIPEPLAN_FUZZ_SECONDS:-25}"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  [ -x "$bin" ] || { echo "pipeplan fuzz: $bin is not built (PIPEPLAN_FUZZ=ON)" >&2; exit 1; }
  # New inputs go to a scratch corpus; the committed seeds stay read-only.
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work"
  # The seeds tests/fuzz/CMakeLists.txt replays.
  case "$t" in
    fuzz_json | fuzz_csv | fuzz_action | fuzz_verify)
      seeds=("$root/tests/errors" "$root/tests/interop" "$root/tests/golden") ;;
    fuzz_layers) seeds=("$root/examples/layers") ;;
    *) seeds=() ;;
  esac
  [ -d "$root/tests/fuzz/corpus/$t" ] && seeds+=("$root/tests/fuzz/corpus/$t")
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  echo "pipeplan fuzz: $t for ${seconds} s" >&2
  "$bin" "$work" "${seeds[@]}" "${dict[@]}" -max_total_time="$seconds" -max_len=4096 \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/$t-" -print_final_stats=1 \
    > "$build/fuzz-$t.log" 2>&1 || { tail -40 "$build/fuzz-$t.log" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
    "$build/fuzz-$t.log" | sed "s/^/  $t /" >&2 || true
  echo "  $t corpus: $(ls "$work" | wc -l) inputs" >&2
done
