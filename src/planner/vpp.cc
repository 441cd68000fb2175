// The seed's (PaddlePaddle's) virtual-pipeline schedules: vpp (interleave),
// vpp-fthenb and vpp-balanced. Loop mapping: local chunk c of rank r is
// stage c*p + r. Paddle numbers its steps per rank and derives the chunk of a
// step from the step index; each chunk then takes its microbatches in order
// (Paddle keeps one FIFO of tensors per chunk), which is what the per-stage
// counters below reproduce.
#include <algorithm>
#include <string>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

// Hands out microbatches 0, 1, 2, ... per local chunk, separately for the
// forward and the backward sweep.
class ChunkCounters {
 public:
  explicit ChunkCounters(int chunks) : next_(static_cast<std::size_t>(chunks), 0) {}
  int take(int chunk) { return next_[static_cast<std::size_t>(chunk)]++; }

 private:
  std::vector<int> next_;
};

// Paddle refuses a virtual pipeline on one chunk per rank (the model must
// have more than one virtual stage) and on fewer than three ranks.
void require_virtual(const PlanMeta& meta, const std::string& name) {
  require(meta.stages_per_rank >= 2, name,
          "needs stages_per_rank >= 2 (a virtual pipeline has several chunks per rank), got " +
              std::to_string(meta.stages_per_rank),
          "pass {v} 2 or more, or use 1f1b for one stage per rank");
  require(
      meta.pp_degree > 2, name,
      "needs pp_degree > 2 (the seed's virtual pipeline refuses 1 or 2 ranks), got " +
          std::to_string(meta.pp_degree),
      "use {p} 3 or more, or interleaved-1f1b for " + std::to_string(meta.pp_degree) + " rank(s)");
}

// Nearest positive multiple of p to m (ties go up, so the pipeline fills).
int nearest_multiple(int m, int p) {
  const int down = (m / p) * p;
  const int up = down + p;
  if (down == 0) return up;
  return (m - down < up - m) ? down : up;
}

void require_divisible(const PlanMeta& meta, const std::string& name) {
  const int p = meta.pp_degree, m = meta.num_microbatches;
  require(m % p == 0, name,
          "needs num_microbatches % pp_degree == 0 (m=" + std::to_string(m) +
              ", p=" + std::to_string(p) + ", remainder " + std::to_string(m % p) + ")",
          "nearest valid m is " + std::to_string(nearest_multiple(m, p)) +
              " (or use vpp, which accepts any m >= 2p)");
}

// vpp: the first `first` microbatches go through every chunk in turn, so a
// remainder m % p is absorbed by the first round; afterwards chunks rotate
// every p steps.
int vpp_chunk(int step, int first, int p, int v) {
  if (step < first * v) return step / first;
  return ((step - first * v) % (p * v)) / p;
}

}  // namespace

void check_vpp(const PlanMeta& meta) {
  require_virtual(meta, "vpp");
  const int p = meta.pp_degree, m = meta.num_microbatches;
  require(m >= 2 * p, "vpp",
          "needs num_microbatches >= 2 * pp_degree (m=" + std::to_string(m) +
              ", 2p=" + std::to_string(2 * p) + "); the seed's interleave driver asserts it",
          "nearest valid m is " + std::to_string(2 * p) +
              ", or use vpp-fthenb / vpp-balanced when m % p == 0");
}

std::vector<Action> plan_vpp(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree, m = meta.num_microbatches, v = meta.stages_per_rank;
  const int first = m % p + p;
  const int total = m * v;
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * first, total);
  const int steady = total - warmup;
  ChunkCounters fwd(v), bwd(v);
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * total));
  auto forward = [&](int step) {
    const int c = vpp_chunk(step, first, p, v);
    out.push_back(make(ActionType::F, c * p + rank, fwd.take(c)));
  };
  // Backward steps walk the chunks in reverse of the forward rotation.
  auto backward = [&](int step) {
    const int c = v - 1 - vpp_chunk(step, first, p, v);
    out.push_back(make(ActionType::B, c * p + rank, bwd.take(c)));
  };
  for (int s = 0; s < warmup; ++s) forward(s);
  for (int s = 0; s < steady; ++s) {
    forward(warmup + s);
    backward(s);
  }
  for (int s = steady; s < total; ++s) backward(s);
  return out;
}

void check_vpp_fthenb(const PlanMeta& meta) {
  require_virtual(meta, "vpp-fthenb");
  require_divisible(meta, "vpp-fthenb");
}

std::vector<Action> plan_vpp_fthenb(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree, m = meta.num_microbatches, v = meta.stages_per_rank;
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * m * v));
  // Chunk of step s is s / m: every microbatch through chunk 0, then chunk 1, ...
  for (int c = 0; c < v; ++c)
    for (int mb = 0; mb < m; ++mb) out.push_back(make(ActionType::F, c * p + rank, mb));
  for (int c = v - 1; c >= 0; --c)
    for (int mb = 0; mb < m; ++mb) out.push_back(make(ActionType::B, c * p + rank, mb));
  return out;
}

void check_vpp_balanced(const PlanMeta& meta) {
  require_virtual(meta, "vpp-balanced");
  require_divisible(meta, "vpp-balanced");
}

std::vector<Action> plan_vpp_balanced(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree, m = meta.num_microbatches, v = meta.stages_per_rank;
  const int total = m * v;
  // All but the last chunk run F-then-B style; the last chunk runs 1F1B, so
  // at most p - r activations of it are live at once.
  const int warmup = m * (v - 1) + (p - rank - 1);
  const int steady = m - (p - rank - 1);
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * total));
  auto forward = [&](int step) {
    const int c = step / m;
    out.push_back(make(ActionType::F, c * p + rank, step % m));
  };
  auto backward = [&](int step) {
    const int c = v - 1 - step / m;
    out.push_back(make(ActionType::B, c * p + rank, step % m));
  };
  for (int s = 0; s < warmup; ++s) forward(s);
  for (int s = 0; s < steady; ++s) {
    forward(warmup + s);
    backward(s);
  }
  for (int s = steady; s < total; ++s) backward(s);
  return out;
}

}  // namespace pipeplan::detail
