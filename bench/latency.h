// The latency benchmark behind `pipeplan bench --latency`: for every library
// schedule over a grid of shapes, transfer latencies and compute cost sets,
// how close each lowering of the compute order comes to the eager bound
// under rendezvous transport, how it compares with torch's lowering of the
// same order, and, where the latency-hiding lowering misses the bound,
// whether the bound is proved out of reach. docs/performance.md records its
// output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipeplan::bench {

/// One set of compute costs (per stage; B the full backward, I + W its split).
struct CostSet {
  std::string name;
  double f = 1, b = 2, i = 1, w = 1;
};

struct LatencyBenchOptions {
  std::vector<std::string> schedules;  ///< empty: every schedule in the table
  int pp_min = 2, pp_max = 8, mb_min = 1, mb_max = 32, v_max = 4;
  /// Transfer times (latency; a bandwidth term only adds to it). Default:
  /// 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3.
  std::vector<double> latencies;
  /// Default: F=1 B=2 I=W=1 (the simulator's defaults), F=1 B=1 I=W=0.5
  /// (a backward as cheap as a forward), F=1 B=3 I=2 W=1 (a heavy backward).
  std::vector<CostSet> cost_sets;
  bool csv = false;  ///< one row per (schedule, cost set, latency) as CSV
};

/// Runs the grid and writes one table row per (schedule, cost set,
/// latency), then per cost set a schedule x latency summary of the shapes at
/// the bound, proved out of reach, and neither. Throws std::runtime_error
/// when a lowered plan fails verification or simulation, or when a
/// lowering's own makespan disagrees with the simulator's.
void run_latency_bench(const LatencyBenchOptions& options, std::ostream& out);

}  // namespace pipeplan::bench
