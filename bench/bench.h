// The benchmark behind `pipeplan bench` and `pipeplan_bench`: times every
// pass of the compiler on large pipelines and reports throughput, per-pass
// memory and the scaling ratios that show each pass is linear.
// docs/performance.md records its output and explains how to read it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipeplan::bench {

/// What to measure. Defaults: the shapes (p = 64; interleaved-1f1b
/// at v = 4, zbv and dualpipev at v = 2; m = 128..2048).
struct BenchOptions {
  std::vector<std::string> schedules;  ///< empty: interleaved-1f1b, zbv, dualpipev
  int pp = 64;
  int stages_per_rank = 0;  ///< 0: 4 for loop-mapped schedules, 2 for V ones
  std::vector<int> microbatches = {128, 256, 512, 1024, 2048};
  int repeat = 3;         ///< each pass runs at least this often...
  double min_time = 0.5;  ///< ...and until this many seconds went by (max 200 runs)
  bool memory = true;     ///< measure each pass's peak RSS growth in a forked child
  bool csv = false;       ///< one CSV row per (case, pass) instead of the tables
};

/// Runs every case and writes the report to `out`. Throws std::runtime_error
/// when a pass gives a wrong result (a failed verification, a round trip
/// that differs). Sets process-wide malloc thresholds (see bench.cc).
void run_bench(const BenchOptions& options, std::ostream& out);

}  // namespace pipeplan::bench
