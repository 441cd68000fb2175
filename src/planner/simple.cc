// gpipe and 1f1b: the seed driver's compute orders (v = 1).
#include "planner/families.h"

#include <algorithm>

namespace pipeplan::detail {

std::vector<Action> plan_gpipe(const PlanMeta& meta, int rank) {
  const int m = meta.num_microbatches;
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * m));
  for (int mb = 0; mb < m; ++mb) out.push_back(make(ActionType::F, rank, mb));
  // The seed sweeps backwards in reverse microbatch order.
  for (int mb = m - 1; mb >= 0; --mb) out.push_back(make(ActionType::B, rank, mb));
  return out;
}

void check_1f1b(const PlanMeta& meta) {
  require(meta.num_microbatches >= meta.pp_degree, "1f1b",
          "needs at least pp_degree=" + std::to_string(meta.pp_degree) + " microbatches, got " +
              std::to_string(meta.num_microbatches) + " (the warmup cannot fill the pipeline)",
          "use {m} " + std::to_string(meta.pp_degree) + " or more, fewer stages ({p} " +
              std::to_string(meta.num_microbatches) + "), or the gpipe schedule");
}

std::vector<Action> plan_1f1b(const PlanMeta& meta, int rank) {
  const int m = meta.num_microbatches;
  const int warmup = std::min(m, meta.pp_degree - rank);
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * m));
  int f = 0, b = 0;
  for (int k = 0; k < warmup; ++k) out.push_back(make(ActionType::F, rank, f++));
  for (int k = 0; k < m - warmup; ++k) {
    out.push_back(make(ActionType::B, rank, b++));
    out.push_back(make(ActionType::F, rank, f++));
  }
  while (b < m) out.push_back(make(ActionType::B, rank, b++));
  return out;
}

}  // namespace pipeplan::detail
