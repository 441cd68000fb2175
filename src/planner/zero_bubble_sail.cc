// sail-sg's handcrafted zero-bubble schedules ZB-H1 and ZB-H2 (v = 1, loop
// mapping). Both split every backward into I (input gradient, on the
// critical path) and W (weight gradient, filler).
//
// Both are "diagonal" schedules: in step x rank r runs F(x), then I(x - a),
// then W(x - a - d), skipping terms outside 0..m-1. The I lag a is how many
// forwards the rank runs before its first backward can arrive; the W lag d is
// how long the rank defers weight gradients so they fill the bubbles that the
// ranks closer to the loss would otherwise leave before their first I.
//   ZB-H1: a = p-r-1,    d = r   (1F1B's memory: at most p-r live forwards)
//   ZB-H2: a = 2(p-r-1), d = 2r  (up to 2p-1 live forwards on rank 0, no bubble
//                                 between a rank's first and last step)
// Step by step this is exactly the phase description of the catalog: warmup
// a forwards; steady [F, I] for d steps then [F, I, W]; cooldown [I, W];
// the last d weight gradients flushed at the end (the parallelogram tail).
#include <algorithm>
#include <string>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

std::vector<Action> diagonal_fiw(int rank, int m, int i_lag, int w_lag) {
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(3 * m));
  const int steps = m + i_lag + w_lag;
  for (int x = 0; x < steps; ++x) {
    if (x < m) out.push_back(make(ActionType::F, rank, x));
    const int i = x - i_lag;
    if (i >= 0 && i < m) out.push_back(make(ActionType::I, rank, i));
    const int w = i - w_lag;
    if (w >= 0 && w < m) out.push_back(make(ActionType::W, rank, w));
  }
  return out;
}

void require_filled(const PlanMeta& meta, const std::string& name) {
  const int p = meta.pp_degree, m = meta.num_microbatches;
  require(m >= p, name,
          "needs at least pp_degree=" + std::to_string(p) + " microbatches, got " +
              std::to_string(m) + " (the warmup cannot fill the pipeline)",
          "use {m} " + std::to_string(p) + " or more, fewer stages ({p} " + std::to_string(m) +
              "), or the gpipe schedule");
}

}  // namespace

void check_zb_h1(const PlanMeta& meta) { require_filled(meta, "zb-h1"); }

std::vector<Action> plan_zb_h1(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree;
  return diagonal_fiw(rank, meta.num_microbatches, p - rank - 1, rank);
}

void check_zb_h2(const PlanMeta& meta) { require_filled(meta, "zb-h2"); }

std::vector<Action> plan_zb_h2(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree;
  return diagonal_fiw(rank, meta.num_microbatches, 2 * (p - rank - 1), 2 * rank);
}

}  // namespace pipeplan::detail
