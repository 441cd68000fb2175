// torch.distributed.pipelining's V-shaped schedules (v = 2): ZBVZeroBubble
// (sail-sg ZB-V) and DualPipeV (DeepSeek). Rank r holds stage r (chunk 0,
// going down the V) and stage 2p-1-r (chunk 1, coming back up). Orders match
// torch 2.11's pipeline_order per rank with idle slots dropped.
#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <utility>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

void require_two_chunks(const PlanMeta& meta, const std::string& name) {
  require(
      meta.stages_per_rank == 2, name,
      "needs exactly 2 stages per rank (V mapping), got " + std::to_string(meta.stages_per_rank),
      "pass {v} 2");
}

/// Emits compute actions for the two local chunks with per-chunk counters.
/// Microbatches >= `keep_below` are dropped (ZB-V plans at least 2p-1).
class ChunkEmitter {
 public:
  ChunkEmitter(const PlanMeta& meta, int rank, int keep_below, std::vector<Action>& out)
      : stage_{rank, 2 * meta.pp_degree - 1 - rank}, keep_below_(keep_below), out_(out) {}

  int stage(int chunk) const { return stage_[chunk]; }
  int forwards(int chunk) const { return f_[chunk]; }
  int backwards(int chunk) const { return b_[chunk]; }

  void forward(int chunk) { emit(ActionType::F, chunk, take_forward(chunk)); }
  /// Full backward (B) or input-gradient backward (I) of the next microbatch.
  void backward(int chunk, ActionType type) { emit(type, chunk, take_backward(chunk)); }
  /// Claims the next forward / backward microbatch without emitting it (for
  /// overlapped groups, which the caller emits as one action).
  int take_forward(int chunk) { return f_[chunk]++; }
  int take_backward(int chunk) { return b_[chunk]++; }
  void weight(int chunk, int mb) { emit(ActionType::W, chunk, mb); }

 private:
  void emit(ActionType t, int chunk, int mb) {
    if (mb < keep_below_) out_.push_back(make(t, stage_[chunk], mb));
  }

  std::array<int, 2> stage_;
  std::array<int, 2> f_{0, 0};
  std::array<int, 2> b_{0, 0};
  int keep_below_;
  std::vector<Action>& out_;
};

}  // namespace

void check_zbv(const PlanMeta& meta) { require_two_chunks(meta, "zbv"); }

std::vector<Action> plan_zbv(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  // Planned for at least 2p-1 microbatches so the V fills; the phantom
  // microbatches are dropped, which leaves torch's relative order intact.
  const int n = std::max(2 * p - 1, m);
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(6 * m));
  ChunkEmitter e(meta, rank, m, out);
  auto iw = [&](int chunk) {  // I immediately followed by its W
    const int mb = e.backwards(chunk);
    e.backward(chunk, ActionType::I);
    e.weight(chunk, mb);
  };

  for (int k = 0; k < 2 * (p - rank) - 1; ++k) e.forward(0);
  for (int k = 0; k < rank; ++k) {
    e.forward(1);
    e.forward(0);
  }
  for (int k = 0; k < p - rank; ++k) {
    e.forward(1);
    iw(1);
  }
  // Steady: chunk 1 trails chunk 0; each round is [F0] I0 W0 F1 I1 W1.
  while (e.forwards(1) < e.forwards(0) || e.forwards(0) < n) {
    if (e.forwards(0) < n) e.forward(0);
    iw(0);
    e.forward(1);
    iw(1);
  }
  // Cooldown: inputs first, weights deferred (chunk 1's before chunk 0's).
  int w0 = e.backwards(0);
  int w1 = e.backwards(1);
  for (int k = 0; k < rank; ++k) {
    e.backward(0, ActionType::I);
    e.backward(1, ActionType::I);
  }
  for (int k = 0; k < p - rank; ++k) {
    e.backward(0, ActionType::I);
    e.weight(0, w0++);
  }
  while (w1 < e.backwards(1)) e.weight(1, w1++);
  while (w0 < e.backwards(0)) e.weight(0, w0++);
  return out;
}

void check_dualpipev(const PlanMeta& meta) {
  require_two_chunks(meta, "dualpipev");
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  std::string fix = "use {m} " + std::to_string(2 * p) + " or more";
  if (m >= 2) fix += ", or at most {p} " + std::to_string(m / 2);
  require(m >= 2 * p, "dualpipev",
          "needs at least as many microbatches as stages (2 * pp_degree = " +
              std::to_string(2 * p) + "), got " + std::to_string(m) + " (torch refuses this shape)",
          fix);
}

std::vector<Action> plan_dualpipev(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(5 * m));
  ChunkEmitter e(meta, rank, m, out);
  std::deque<std::pair<int, int>> pending_w;  // (chunk, mb) of I's, oldest first

  auto split_backward = [&](int chunk) {
    pending_w.emplace_back(chunk, e.backwards(chunk));
    e.backward(chunk, ActionType::I);
  };
  auto retire_w = [&] {  // no-op when nothing is pending, as in DualPipe
    if (pending_w.empty()) return;
    e.weight(pending_w.front().first, pending_w.front().second);
    pending_w.pop_front();
  };
  auto overlap = [&](int f_chunk, int b_chunk) {  // F of one chunk with B of the other
    const int fmb = e.take_forward(f_chunk);
    const int bmb = e.take_backward(b_chunk);
    out.push_back(make_overlap(e.stage(f_chunk), fmb, e.stage(b_chunk), bmb));
  };

  // 1-2: fill chunk 0 down the V, then alternate into chunk 1.
  for (int k = 0; k < 2 * (p - rank - 1); ++k) e.forward(0);
  for (int k = 0; k < rank + 1; ++k) {
    e.forward(0);
    e.forward(1);
  }
  // 3: zero-bubble ramp on chunk 1: I, the oldest W, F.
  for (int k = 0; k < p - rank - 1; ++k) {
    split_backward(1);
    retire_w();
    e.forward(1);
  }
  // 4: main phase, overlapped pairs F0+B1 then F1+B0. The tip of the V
  // (last rank) runs its first F0 and B1 apart to shrink the bubble.
  for (int k = 0; k < m - 2 * p + rank + 1; ++k) {
    if (k == 0 && rank == p - 1) {
      e.forward(0);
      e.backward(1, ActionType::B);
    } else {
      overlap(0, 1);
    }
    overlap(1, 0);
  }
  // 5: chunk 0 has no forwards left: B1 alone, then F1+B0.
  for (int k = 0; k < p - rank - 1; ++k) {
    e.backward(1, ActionType::B);
    overlap(1, 0);
  }
  // 6: drain both chunks; from pair h = (rank+1)/2 on the backwards split
  // into I (W deferred). Odd ranks switch before that pair's B1, even ranks
  // between its B1 and B0.
  const int h = (rank + 1) / 2;
  for (int k = 0; k < rank + 1; ++k) {
    const bool split1 = k > h || (k == h && rank % 2 == 1);
    if (split1) split_backward(1);
    else e.backward(1, ActionType::B);
    if (k >= h) split_backward(0);
    else e.backward(0, ActionType::B);
  }
  // 7-8: fill the tail with deferred W's, remaining chunk-0 inputs split.
  for (int k = 0; k < p - rank - 1; ++k) {
    retire_w();
    split_backward(0);
  }
  // 8: the remaining rank+1 deferred W's (exactly what is still pending).
  while (!pending_w.empty()) retire_w();
  return out;
}

}  // namespace pipeplan::detail
