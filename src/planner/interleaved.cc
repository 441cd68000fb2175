// torch.distributed.pipelining's loop-mapped multi-stage schedules:
// Interleaved1F1B, InterleavedZeroBubble (ZB1P) and LoopedBFS. Orders match
// torch 2.11's pipeline_order per rank with idle slots dropped.
#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

/// torch's flexible interleaving: microbatches run in `rounds` rounds of
/// `per_round` each; valid only when the rounds divide m evenly.
int rounds_of(int m, int p) { return std::max(1, m / p); }
bool interleaving_fits(int m, int p) { return m % rounds_of(m, p) == 0; }

/// Steps of one rank: `warmup` forward-only steps, then forward+backward
/// steps until every forward ran, then `warmup` backward-only steps. Step k's
/// forward runs local chunk (k / per_round) % v; backward step k runs chunk
/// v-1 - ((k - warmup) / per_round) % v. Each stage counts its microbatches.
/// With `zero_bubble` the backward is I and, once rank r has done r steady
/// backwards (its 1F1B-like ramp), every backward step also retires the
/// oldest pending W; the rest are flushed at the end.
std::vector<Action> interleaved_rank(const PlanMeta& meta, int rank, bool zero_bubble) {
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  const int v = meta.stages_per_rank;
  const int per_round = m / rounds_of(m, p);
  // Rank r is p-1-r hops from the last rank; each hop costs one forward and,
  // without the I/W split, one backward before its first gradient arrives.
  const int hop_cost = zero_bubble ? 1 : 2;
  const int total = m * v;
  const int warmup = std::min((v - 1) * per_round + hop_cost * (p - 1 - rank), total);

  std::vector<int> next_f(static_cast<std::size_t>(v), 0);
  std::vector<int> next_b(static_cast<std::size_t>(v), 0);
  std::deque<std::pair<int, int>> pending_w;  // (stage, mb) of issued I's
  const ActionType back = zero_bubble ? ActionType::I : ActionType::B;

  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>((zero_bubble ? 3 : 2) * total));
  auto stage_of_chunk = [&](int chunk) { return chunk * p + rank; };
  auto retire_w = [&] {
    out.push_back(make(ActionType::W, pending_w.front().first, pending_w.front().second));
    pending_w.pop_front();
  };

  for (int step = 0; step < total + warmup; ++step) {
    if (step < total) {
      const int chunk = (step / per_round) % v;
      out.push_back(make(ActionType::F, stage_of_chunk(chunk), next_f[chunk]++));
    }
    if (step < warmup) continue;
    const int chunk = v - 1 - ((step - warmup) / per_round) % v;
    const int mb = next_b[chunk]++;
    out.push_back(make(back, stage_of_chunk(chunk), mb));
    if (!zero_bubble) continue;
    pending_w.emplace_back(stage_of_chunk(chunk), mb);
    if (step - warmup >= rank) retire_w();
  }
  while (!pending_w.empty()) retire_w();
  return out;
}

/// Nearest microbatch counts below and above m that torch's rounds accept.
std::string nearest_valid_m(int m, int p) {
  int below = m - 1;
  while (below >= 1 && !interleaving_fits(below, p)) --below;
  int above = m + 1;
  while (!interleaving_fits(above, p)) ++above;
  std::string fix = "use {m} " + std::to_string(above);
  if (below >= 1) fix = "use {m} " + std::to_string(below) + " or {m} " + std::to_string(above);
  return fix + " (any multiple of pp_degree=" + std::to_string(p) + " works)";
}

}  // namespace

void check_interleaved(const PlanMeta& meta) {
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  const std::string name = meta.schedule.empty() ? "interleaved-1f1b" : meta.schedule;
  require(meta.stages_per_rank >= 1, name,
          "needs at least 1 stage per rank, got " + std::to_string(meta.stages_per_rank),
          "pass {v} 2");
  const int rounds = rounds_of(m, p);
  require(m % rounds == 0, name,
          "needs num_microbatches divisible by its number of rounds max(1, m / pp_degree) = " +
              std::to_string(rounds) + ", got m=" + std::to_string(m) +
              " with pp_degree=" + std::to_string(p) + " (torch refuses this shape)",
          nearest_valid_m(m, p));
}

std::vector<Action> plan_interleaved_1f1b(const PlanMeta& meta, int rank) {
  return interleaved_rank(meta, rank, false);
}

std::vector<Action> plan_interleaved_zb(const PlanMeta& meta, int rank) {
  return interleaved_rank(meta, rank, true);
}

std::vector<Action> plan_looped_bfs(const PlanMeta& meta, int rank) {
  const int p = meta.pp_degree;
  const int m = meta.num_microbatches;
  const int v = meta.stages_per_rank;
  std::vector<Action> out;
  out.reserve(static_cast<std::size_t>(2 * m * v));
  // Breadth first: every microbatch through a local stage before the next
  // stage; backwards retrace the stages and microbatches in reverse.
  for (int c = 0; c < v; ++c)
    for (int mb = 0; mb < m; ++mb) out.push_back(make(ActionType::F, c * p + rank, mb));
  for (int c = v - 1; c >= 0; --c)
    for (int mb = m - 1; mb >= 0; --mb) out.push_back(make(ActionType::B, c * p + rank, mb));
  return out;
}

}  // namespace pipeplan::detail
