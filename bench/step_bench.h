// `pipeplan bench --step`: the per-step path for microbatches of different
// lengths (docs/lengths.md). For seeded step lengths (a long-tailed
// lognormal and a uniform draw) on the given layer profiles it times
// plan + lower + verify of one schedule and plan_step's fast path, and
// tabulates the step's makespan padded, unpadded in arrival order,
// plan_step's, the search's, and, from the step's sequences, first fit
// decreasing against plan_step's packing.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/profile.h"

namespace pipeplan::bench {

struct StepBenchOptions {
  int pp = 8;
  int microbatches = 64;
  double comm = 0.0;        ///< transfer latency
  double time_limit = 3.0;  ///< the search's
  unsigned seed = 1;
  int repeat = 20;  ///< timed runs of each fast path (the least is reported)
};

/// Writes Markdown tables: the fast path's times, then per (profile,
/// distribution) the makespans and the targets of docs/lengths.md.
void run_step_bench(const std::vector<std::pair<std::string, LayerProfile>>& profiles,
                    const StepBenchOptions& options, std::ostream& out);

}  // namespace pipeplan::bench
