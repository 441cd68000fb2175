// `pipeplan bench --search DIR`: the search benchmark of docs/search.md.
// For each layer profile and each memory budget (a multiple of 1F1B's peak)
// it runs search() and tabulates the best library schedule that fits, the
// search's makespan, the lower bound, the gap and the time taken.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/profile.h"

namespace pipeplan::bench {

struct SearchBenchOptions {
  int pp = 8;
  int microbatches = 32;
  std::vector<double> budgets = {0.6, 1.0, 1.5};  ///< x 1F1B's peak memory
  std::vector<double> comm = {0.0};               ///< transfer times to try
  double time_limit = 3.0;
};

/// Writes a Markdown table, one row per (profile, comm, budget). Profiles
/// too small for p get a row saying so.
void run_search_bench(const std::vector<std::pair<std::string, LayerProfile>>& profiles,
                      const SearchBenchOptions& options, std::ostream& out);

}  // namespace pipeplan::bench
