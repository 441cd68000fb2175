// The one schedule table, name lookup and the planner entry points.
#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "ir/edit_distance.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/planner.h"
#include "planner/families.h"

namespace pipeplan {
namespace detail {

void require(bool ok, const std::string& schedule, const std::string& what,
             const std::string& fix) {
  if (!ok) throw ShapeError(schedule + ": " + what, fix);
}

}  // namespace detail

namespace {

using detail::edit_distance;
using detail::require;

void no_extra_check(const PlanMeta&) {}

// Schedules without a seed order to reproduce get the latency-hiding
// lowering. Where each rank talks to at most its two neighbours along one
// chain (zbv, dualpipev, zb-h1, zb-h2) each rank pair keeps its own order,
// which the serial model runs too (tests/sweep_test.cc).
LowerOptions latency_hiding() { return LowerOptions{}; }

// The loop-mapped schedules with several stages per rank: the wrap-around
// (rank p-1 to rank 0) makes per-pair orders cross under the serial model,
// so they keep one transfer order per rank. For the nominal costs the
// default plans for, that costs nothing under rendezvous (the pair orders
// reach the eager bound, and so does this one; docs/verification.md,
// "Lowering"); planner.cc drops it for stated costs, where it can.
LowerOptions one_order_per_rank() {
  LowerOptions o;
  o.serial_safe = true;
  return o;
}

// gpipe and 1f1b keep the seed driver's order unless asked otherwise.
LowerOptions seed(SendPlacement placement) {
  LowerOptions o;
  o.mode = LowerMode::Seed;
  o.send_placement = placement;
  return o;
}

// The table: one row per schedule, in display order. Columns (planner.h):
// name, aliases, origin, description, mapping, default v, allowed v (empty:
// any), constraints, shape check, compute order of one rank, lowering.
std::vector<ScheduleInfo> make_table() {
  const auto Loop = StageMapping::Loop;
  const auto V = StageMapping::V;
  const LowerOptions hiding = latency_hiding();
  const LowerOptions one_order = one_order_per_rank();
  return {
      {"gpipe",
       {"GPipe", "ScheduleGPipe", "fill-drain"},
       "seed 000 (ScheduleGPipe)",
       "all forwards, then all backwards in reverse microbatch order",
       Loop,
       1,
       {1},
       "v = 1; any m",
       no_extra_check,
       detail::plan_gpipe,
       seed(SendPlacement::Earliest)},
      {"1f1b",
       {"1F1B", "Schedule1F1B", "one-forward-one-backward", "pipedream-flush"},
       "seed 000 (Schedule1F1B), torch Schedule1F1B",
       "warmup min(m, p-r) forwards, then alternate backward/forward, then drain",
       Loop,
       1,
       {1},
       "v = 1; m >= p",
       detail::check_1f1b,
       detail::plan_1f1b,
       seed(SendPlacement::ParityStaggered)},
      // interleaved.cc: torch's loop-mapped multi-stage schedules.
      {"interleaved-1f1b",
       {"Interleaved1F1B", "ScheduleInterleaved1F1B"},
       "torch Interleaved1F1B (2.11), Megatron-LM interleaved 1F1B",
       "depth-first interleaving: warmup (v-1)*mpr + 2*(p-1-r) forwards, then F/B pairs "
       "cycling local stages every mpr = m / max(1, m // p) microbatches, then drain",
       Loop,
       2,
       {},
       "any v >= 1; m divisible by max(1, m // p) (e.g. m % p == 0, or m <= p)",
       detail::check_interleaved,
       detail::plan_interleaved_1f1b,
       one_order},
      {"looped-bfs",
       {"LoopedBFS", "ScheduleLoopedBFS", "breadth-first", "bfs"},
       "torch LoopedBFS (2.11), Lamy-Poirier breadth-first pipeline parallelism",
       "every microbatch through each local stage in turn, then backwards over the "
       "stages and microbatches in reverse",
       Loop,
       2,
       {},
       "any v >= 1; any m",
       no_extra_check,
       detail::plan_looped_bfs,
       one_order},
      {"interleaved-zb",
       {"InterleavedZeroBubble", "ScheduleInterleavedZeroBubble", "interleaved-zero-bubble"},
       "torch InterleavedZeroBubble (2.11), sail-sg ZB1P",
       "interleaved 1F1B with warmup (v-1)*mpr + (p-1-r), I instead of B, and the oldest "
       "pending W after each backward once rank r did r steady steps; W flushed at the end",
       Loop,
       2,
       {},
       "any v >= 1; m divisible by max(1, m // p) (e.g. m % p == 0, or m <= p)",
       detail::check_interleaved,
       detail::plan_interleaved_zb,
       one_order},
      // zero_bubble_torch.cc: torch's V-mapped schedules.
      {"zbv",
       {"ZBVZeroBubble", "ScheduleZBVZeroBubble", "zb-v", "zero-bubble-v"},
       "torch ZBVZeroBubble (2.11), sail-sg ZB-V",
       "V-shaped zero bubble: chunk 0 down, chunk 1 back up; F/I/W steady state planned "
       "for max(2p-1, m) microbatches, the extra ones dropped",
       V,
       2,
       {2},
       "v = 2; any m",
       detail::check_zbv,
       detail::plan_zbv,
       hiding},
      {"dualpipev",
       {"DualPipeV", "ScheduleDualPipeV", "dualpipe-v", "dual-pipe-v"},
       "torch DualPipeV (2.11), DeepSeek DualPipeV",
       "DeepSeek's eight phases on a V: overlapped F+B pairs (OVERLAP_F_B) in the main "
       "phase, zero-bubble I/W split in the ramp and the drain",
       V,
       2,
       {2},
       "v = 2; m >= 2p",
       detail::check_dualpipev,
       detail::plan_dualpipev,
       hiding},
      // dualpipe.cc: two pipelines in opposite directions, microbatch routes.
      {"dualpipe",
       {"DualPipe", "dual-pipe", "bidirectional-dualpipe"},
       "DeepSeek DualPipe (deepseek-ai/DualPipe dualpipe/dualpipe.py, DeepSeek-V3)",
       "two pipelines in opposite directions over the same ranks (the model held twice): "
       "half the microbatches cross stages 0..p-1 from rank 0, half stages p..2p-1 from rank "
       "p-1; overlapped F+B pairs (OVERLAP_F_B) in the main step, I/W split in ramp and drain",
       V,
       2,
       {2},
       "v = 2; p even; m even, m >= 2p",
       detail::check_dualpipe,
       detail::plan_dualpipe,
       hiding,
       detail::routes_dualpipe},
      // controllable_memory.cc: Qi et al., Pipeline Parallelism with Controllable Memory.
      {"v-half",
       {"V-Half", "VHalf", "zbv-half", "zb-v-half"},
       "Qi et al. 2024 (Pipeline Parallelism with Controllable Memory), sail-sg zbv_greedy.py",
       "V-shaped F/I/W building block repeated every 6 slots, squeezed under its memory cap: "
       "about half of 1F1B's peak activation per rank, little bubble",
       V,
       2,
       {2},
       "v = 2; any m",
       detail::check_v_half,
       detail::plan_v_half,
       hiding},
      {"v-min",
       {"V-Min", "VMin", "zbv-min", "zb-v-min"},
       "Qi et al. 2024 (Pipeline Parallelism with Controllable Memory), sail-sg zbv_greedy.py",
       "V-shaped F/I/W building block with the shortest lifespan, squeezed under its memory "
       "cap: about a third of 1F1B's peak activation per rank, at some bubble",
       V,
       2,
       {2},
       "v = 2; any m",
       detail::check_v_min,
       detail::plan_v_min,
       hiding},
      // zero_bubble_sail.cc: sail-sg handcrafted zero-bubble schedules.
      {"zb-h1",
       {"ZB-H1", "ZBH1", "ZeroBubbleH1", "zero-bubble-h1"},
       "sail-sg zero-bubble-pipeline-parallelism (handcrafted ZB-H1)",
       "1F1B with the backward split into I and W; rank r defers its first r W "
       "into the drain, so the bubble shrinks to (p-1)(F+I-W) at 1F1B's memory",
       Loop,
       1,
       {1},
       "v = 1; m >= p",
       detail::check_zb_h1,
       detail::plan_zb_h1,
       hiding},
      {"zb-h2",
       {"ZB-H2", "ZBH2", "ZeroBubbleH2", "zero-bubble-h2"},
       "sail-sg zero-bubble-pipeline-parallelism (handcrafted ZB-H2)",
       "ZB-H1 with 2(p-r-1) warmup forwards (2p-1 in flight on rank 0) and the "
       "last 2r W flushed at the end: a parallelogram with no bubble inside",
       Loop,
       1,
       {1},
       "v = 1; m >= p",
       detail::check_zb_h2,
       detail::plan_zb_h2,
       hiding},
      // vpp.cc: seed 002 (PaddlePaddle) virtual pipeline schedules.
      {"vpp",
       {"VPP", "interleave", "PipelineParallelWithInterleave", "paddle-vpp"},
       "seed 002 (Paddle PipelineParallelWithInterleave)",
       "interleaved 1F1B over v chunks; the first m%p+p microbatches pass each chunk "
       "in turn, then chunks rotate every p steps, so any m >= 2p works",
       Loop,
       2,
       {},
       "v >= 2; p > 2; m >= 2p (any m % p)",
       detail::check_vpp,
       detail::plan_vpp,
       one_order},
      {"vpp-fthenb",
       {"VPP-FthenB", "PipelineParallelWithInterleaveFthenB", "vpp-f-then-b", "paddle-vpp-fthenb"},
       "seed 002 (Paddle PipelineParallelWithInterleaveFthenB)",
       "every forward chunk by chunk, then every backward in reverse chunk order",
       Loop,
       2,
       {},
       "v >= 2; p > 2; m % p == 0",
       detail::check_vpp_fthenb,
       detail::plan_vpp_fthenb,
       one_order},
      {"vpp-balanced",
       {"VPPFhenBInBalancedMemory", "VPPFthenBInBalancedMemory", "vpp-balanced-memory",
        "paddle-vpp-balanced"},
       "seed 002 (Paddle VPPFhenBInBalancedMemory)",
       "F-then-B over the first v-1 chunks, 1F1B on the last chunk, backwards in "
       "reverse chunk order (less live activation than vpp-fthenb)",
       Loop,
       2,
       {},
       "v >= 2; p > 2; m % p == 0",
       detail::check_vpp_balanced,
       detail::plan_vpp_balanced,
       one_order},
  };
}

std::string normalize(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '_') c = '-';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

const std::vector<ScheduleInfo>& schedules() {
  static const std::vector<ScheduleInfo> table = make_table();
  return table;
}

const ScheduleInfo& find_schedule(const std::string& name) {
  const std::string key = normalize(name);
  for (const auto& s : schedules()) {
    if (normalize(s.name) == key) return s;
    for (const auto& a : s.aliases)
      if (normalize(a) == key) return s;
  }
  std::string best;
  std::size_t best_d = 4;
  std::string names;
  for (const auto& s : schedules()) {
    names += (names.empty() ? "" : ", ") + s.name;
    std::size_t d = edit_distance(key, normalize(s.name));
    for (const auto& a : s.aliases) d = std::min(d, edit_distance(key, normalize(a)));
    if (d < best_d) best_d = d, best = s.name;
  }
  std::string msg = "unknown schedule '" + limits::excerpt(name) + "'";
  if (!best.empty()) msg += " (did you mean '" + best + "'?)";
  throw InputError(msg + "; known schedules: " + names);
}

namespace detail {

PlanMeta resolve_with(const ScheduleInfo& info, const Problem& problem) {
  PlanMeta meta;
  meta.schedule = info.name;
  meta.pp_degree = problem.pp_degree;
  meta.num_microbatches = problem.num_microbatches;
  meta.stages_per_rank =
      problem.stages_per_rank > 0 ? problem.stages_per_rank : info.default_stages_per_rank;
  meta.mapping = info.mapping;
  require(problem.pp_degree >= 1, info.name,
          "pp_degree must be at least 1, got " + std::to_string(problem.pp_degree),
          "pass {p} 1 or more");
  require(problem.num_microbatches >= 1, info.name,
          "needs at least 1 microbatch, got " + std::to_string(problem.num_microbatches),
          "pass {m} 1 or more");
  require(problem.stages_per_rank >= 0, info.name,
          "stages_per_rank must be positive, got " + std::to_string(problem.stages_per_rank),
          "pass {v} 1 or more");
  // The readers and the verifier refuse the same shapes (limits.h).
  const std::string too_large =
      limits::shape_problem(meta.pp_degree, meta.stages_per_rank, meta.num_microbatches);
  require(too_large.empty(), info.name, too_large, "use fewer ranks, stages or microbatches");
  const auto& allowed = info.allowed_stages_per_rank;
  if (!allowed.empty() &&
      std::find(allowed.begin(), allowed.end(), meta.stages_per_rank) == allowed.end()) {
    std::string list;
    for (int v : allowed) list += (list.empty() ? "" : " or ") + std::to_string(v);
    require(false, info.name,
            "supports stages_per_rank " + list + ", got " + std::to_string(meta.stages_per_rank),
            "pass {v} " + std::to_string(allowed.front()));
  }
  info.check_shape(meta);
  if (info.routes) meta.routes = info.routes(meta);
  meta.forward_only = problem.forward_only;
  return meta;
}

LowerOptions lowering_of(LowerOptions own, const PlanMeta& meta) {
  if (!meta.forward_only) return own;
  // Forward values cross the boundary s -> s+1 from rank_of(s) to
  // rank_of(s+1); a pair that sees both directions could meet head-on.
  bool both_ways = false;
  const int S = meta.num_stages();
  std::vector<std::pair<int, int>> dirs;
  for (int s = 0; s + 1 < S && !both_ways; ++s) {
    const int a = meta.rank_of(s), b = meta.rank_of(s + 1);
    if (a == b) continue;
    both_ways = std::find(dirs.begin(), dirs.end(), std::make_pair(b, a)) != dirs.end();
    dirs.emplace_back(a, b);
  }
  if (both_ways) own.send_placement = SendPlacement::ParityStaggered;
  return own;
}

}  // namespace detail

PlanMeta resolve(const Problem& problem) {
  return detail::resolve_with(find_schedule(problem.schedule), problem);
}

LowerOptions default_lowering(const std::string& schedule) {
  for (const auto& s : schedules()) {
    if (s.name == schedule) return s.lowering;
    for (const auto& alias : s.aliases)
      if (alias == schedule) return s.lowering;
  }
  return LowerOptions{};
}

LowerOptions schedule_lowering(const PlanMeta& meta) {
  return detail::lowering_of(default_lowering(meta.schedule), meta);
}

}  // namespace pipeplan
