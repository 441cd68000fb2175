// DeepSeek's bidirectional DualPipe (deepseek-ai/DualPipe, dualpipe/dualpipe.py,
// DualPipe.step): two pipelines of p stages run in opposite directions over
// the same p ranks, each rank holding one chunk of each (the model twice).
// In pipeplan's terms a V mapping with 2p stages and microbatch routes: rank
// r holds stage r (the forward-direction pipeline, inputs on rank 0) and
// stage 2p-1-r (the reverse pipeline, inputs on rank p-1); microbatches
// 0..m/2-1 cross stages 0..p-1, microbatches m/2..m-1 stages p..2p-1.
#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

/// One rank's emitter in DualPipe.step's terms. step() names a rank's two
/// chunks by "phase": phase 0 is the direction that starts on the rank's own
/// half of the pipe (for the second half of the ranks, the reverse one).
class DualPipeRank {
 public:
  DualPipeRank(const PlanMeta& meta, int rank, std::vector<Action>& out)
      : stage_{rank, 2 * meta.pp_degree - 1 - rank},
        first_mb_{0, meta.num_microbatches / 2},
        second_half_(rank >= meta.pp_degree / 2),
        out_(out) {}

  void forward(int phase) {
    const int c = chunk(phase);
    out_.push_back(make(ActionType::F, stage_[c], first_mb_[c] + f_[c]++));
  }
  /// A full backward, or (zero bubble) an I whose W waits in a FIFO queue.
  void backward(int phase, bool zero_bubble = false) {
    const int c = chunk(phase);
    const int mb = first_mb_[c] + b_[c]++;
    if (!zero_bubble) {
      out_.push_back(make(ActionType::B, stage_[c], mb));
      return;
    }
    out_.push_back(make(ActionType::I, stage_[c], mb));
    pending_w_.emplace_back(stage_[c], mb);
  }
  /// Retires the oldest deferred weight gradient (DualPipe's queue is never
  /// popped empty: it asserts so).
  void weight() {
    if (pending_w_.empty()) return;
    out_.push_back(make(ActionType::W, pending_w_.front().first, pending_w_.front().second));
    pending_w_.pop_front();
  }
  /// The forward of one phase overlapped with the full backward of the other.
  void overlap(int f_phase, int b_phase) {
    const int fc = chunk(f_phase), bc = chunk(b_phase);
    out_.push_back(
        make_overlap(stage_[fc], first_mb_[fc] + f_[fc]++, stage_[bc], first_mb_[bc] + b_[bc]++));
  }

 private:
  int chunk(int phase) const { return phase ^ (second_half_ ? 1 : 0); }

  int stage_[2];
  int first_mb_[2];
  bool second_half_;
  int f_[2] = {0, 0}, b_[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_w_;  // (stage, mb), oldest first
  std::vector<Action>& out_;
};

}  // namespace

void check_dualpipe(const PlanMeta& meta) {
  const int p = meta.pp_degree, m = meta.num_microbatches;
  require(meta.stages_per_rank == 2, "dualpipe",
          "needs exactly 2 stages per rank (one per direction), got " +
              std::to_string(meta.stages_per_rank),
          "pass {v} 2");
  require(p % 2 == 0, "dualpipe",
          "needs an even pp_degree (DualPipe asserts num_ranks % 2 == 0), got " + std::to_string(p),
          "use {p} " + std::to_string(p + 1));
  std::string fix = "use {m} " + std::to_string(std::max(2 * p, m + m % 2)) + " or more";
  require(
      m % 2 == 0 && m >= 2 * p, "dualpipe",
      "needs an even number of microbatches, at least 2 * pp_degree = " + std::to_string(2 * p) +
          " (DualPipe asserts num_chunks % 2 == 0 and num_chunks >= " + "num_ranks * 2), got " +
          std::to_string(m),
      fix + ", even");
}

std::vector<Route> routes_dualpipe(const PlanMeta& meta) {
  const int p = meta.pp_degree, m = meta.num_microbatches;
  std::vector<Route> routes(static_cast<std::size_t>(m), Route{0, p - 1});
  for (int mb = m / 2; mb < m; ++mb) routes[static_cast<std::size_t>(mb)] = Route{p, 2 * p - 1};
  return routes;
}

// DualPipe.step's eight steps, with h = min(r, p-1-r) the rank's distance
// from the nearer end and n = p/2.
std::vector<Action> plan_dualpipe(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree, half_m = meta.num_microbatches / 2;
  const int n = p / 2, h = std::min(rank, p - 1 - rank);
  const bool middle = rank == n - 1 || rank == n;
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(4 * meta.num_microbatches));
  DualPipeRank e(meta, rank, out);
  // 1-2: fill phase 0, then alternate into phase 1.
  for (int k = 0; k < 2 * (n - h - 1); ++k) e.forward(0);
  for (int k = 0; k < h + 1; ++k) {
    e.forward(0);
    e.forward(1);
  }
  // 3: zero-bubble ramp on phase 1: I, the oldest W, F.
  for (int k = 0; k < n - h - 1; ++k) {
    e.backward(1, true);
    e.weight();
    e.forward(1);
  }
  // 4: main step, overlapped F0+B1 then F1+B0; the two middle ranks run
  // their first F0 and B1 apart (DeepSeek: to shrink the bubble further).
  for (int k = 0; k < half_m - p + h + 1; ++k) {
    if (k == 0 && middle) {
      e.forward(0);
      e.backward(1);
    } else {
      e.overlap(0, 1);
    }
    e.overlap(1, 0);
  }
  // 5: phase 0 has no forwards left: B1 alone, then F1+B0.
  for (int k = 0; k < n - h - 1; ++k) {
    e.backward(1);
    e.overlap(1, 0);
  }
  // 6: drain both phases; the second half of these backwards split into I
  // (odd h switch before the middle pair's B1, even h between its B1 and B0).
  bool zero_bubble = false;
  for (int k = 0; k < h + 1; ++k) {
    if (k == (h + 1) / 2 && h % 2 == 1) zero_bubble = true;
    e.backward(1, zero_bubble);
    if (k == (h + 1) / 2 && h % 2 == 0) zero_bubble = true;
    e.backward(0, zero_bubble);
  }
  // 7: deferred W's between the last phase-0 inputs, split.
  for (int k = 0; k < n - h - 1; ++k) {
    e.weight();
    e.backward(0, true);
  }
  // 8: the remaining h+1 deferred W's.
  for (int k = 0; k < h + 1; ++k) e.weight();
  return out;
}

}  // namespace pipeplan::detail
