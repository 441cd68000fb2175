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

}  // namespace pipeplan
