// The latency benchmark behind `pipeplan bench --latency`: for every library
// schedule over a grid of shapes and transfer costs, how close each lowering
// of the compute order comes to the eager bound under rendezvous transport,
// and how it compares with torch's lowering of the same order.
// docs/performance.md records its output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipeplan::bench {

/// One transfer-cost case: latency + bytes / bandwidth per transfer.
struct CommCase {
  double latency = 0.0, bandwidth = 0.0, bytes = 0.0;
  std::string name() const;
};

struct LatencyBenchOptions {
  std::vector<std::string> schedules;  ///< empty: every schedule in the table
  int pp_min = 2, pp_max = 8, mb_min = 1, mb_max = 32, v_max = 4;
  /// Default: latency 0.1, 0.25, 1, and 0.1 + 40 bytes at 100 bytes per unit.
  std::vector<CommCase> cases;
  bool csv = false;  ///< one row per (schedule, case) as CSV
};

/// Runs the grid and writes one table row per (schedule, case). Throws
/// std::runtime_error when a lowered plan fails verification or simulation.
void run_latency_bench(const LatencyBenchOptions& options, std::ostream& out);

}  // namespace pipeplan::bench
