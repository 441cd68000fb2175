// Side-by-side comparison of schedules: ordering the rows.
#include "pipeplan/compare.h"

#include <algorithm>

#include "ir/numbers.h"

namespace pipeplan {
namespace {

using detail::tidy;

int group(const ComparisonRow& r) { return !r.skipped.empty() ? 2 : !r.problems.empty() ? 1 : 0; }

}  // namespace

double ComparisonRow::peak_rank_activations() const {
  double peak = 0;
  for (const RankStats& r : ranks) peak = std::max(peak, r.peak_rank_activations);
  return peak;
}

double ComparisonRow::peak_memory() const {
  double peak = 0;
  for (const RankStats& r : ranks) peak = std::max(peak, r.peak_memory);
  return peak;
}

void sort_comparison(std::vector<ComparisonRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const ComparisonRow& a, const ComparisonRow& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    if (group(a) == 0 && tidy(a.makespan) != tidy(b.makespan)) return a.makespan < b.makespan;
    return false;
  });
}

std::string comparison_refusal(const std::vector<ComparisonRow>& rows, int pp_degree,
                               int num_microbatches, int stages_per_rank) {
  if (rows.empty()) return "no schedule to compare";
  for (const ComparisonRow& r : rows)
    if (r.skipped.empty()) return {};
  const bool shared = std::all_of(rows.begin(), rows.end(), [&](const ComparisonRow& r) {
    return r.skipped == rows.front().skipped;
  });
  if (shared && rows.size() > 1) return "no schedule ran: " + rows.front().skipped;
  return "no schedule accepts pp " + std::to_string(pp_degree) + " with " +
         std::to_string(num_microbatches) + " microbatches" +
         (stages_per_rank > 0 ? " and " + std::to_string(stages_per_rank) + " stages per rank"
                              : std::string());
}

}  // namespace pipeplan
