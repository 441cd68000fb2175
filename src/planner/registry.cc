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
// lowering, per-pair order (serial safety is an option: it costs time).
LowerOptions latency_hiding() { return LowerOptions{}; }

// gpipe and 1f1b keep the seed driver's order unless asked otherwise.
LowerOptions seed(SendPlacement placement) {
  LowerOptions o;
  o.mode = LowerMode::Seed;
  o.send_placement = placement;
  return o;
}

// One block per schedule, fields by name (planner.h documents each).
std::vector<ScheduleInfo> make_table() {
  std::vector<ScheduleInfo> t;
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "gpipe";
    s.aliases = {"GPipe", "ScheduleGPipe", "fill-drain"};
    s.origin = "seed 000 (ScheduleGPipe)";
    s.description = "all forwards, then all backwards in reverse microbatch order";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 1;
    s.allowed_stages_per_rank = {1};
    s.constraints = "v = 1; any m";
    s.check_shape = no_extra_check;
    s.plan_rank = detail::plan_gpipe;
    s.lowering = seed(SendPlacement::Earliest);
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "1f1b";
    s.aliases = {"1F1B", "Schedule1F1B", "one-forward-one-backward", "pipedream-flush"};
    s.origin = "seed 000 (Schedule1F1B), torch Schedule1F1B";
    s.description = "warmup min(m, p-r) forwards, then alternate backward/forward, then drain";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 1;
    s.allowed_stages_per_rank = {1};
    s.constraints = "v = 1; m >= p";
    s.check_shape = detail::check_1f1b;
    s.plan_rank = detail::plan_1f1b;
    s.lowering = seed(SendPlacement::ParityStaggered);
  }
  // interleaved.cc: torch's loop-mapped multi-stage schedules.
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "interleaved-1f1b";
    s.aliases = {"Interleaved1F1B", "ScheduleInterleaved1F1B"};
    s.origin = "torch Interleaved1F1B (2.11), Megatron-LM interleaved 1F1B";
    s.description =
        "depth-first interleaving: warmup (v-1)*mpr + 2*(p-1-r) forwards, then F/B pairs "
        "cycling local stages every mpr = m / max(1, m // p) microbatches, then drain";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "any v >= 1; m divisible by max(1, m // p) (e.g. m % p == 0, or m <= p)";
    s.check_shape = detail::check_interleaved;
    s.plan_rank = detail::plan_interleaved_1f1b;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "looped-bfs";
    s.aliases = {"LoopedBFS", "ScheduleLoopedBFS", "breadth-first", "bfs"};
    s.origin = "torch LoopedBFS (2.11), Lamy-Poirier breadth-first pipeline parallelism";
    s.description =
        "every microbatch through each local stage in turn, then backwards over the "
        "stages and microbatches in reverse";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "any v >= 1; any m";
    s.check_shape = no_extra_check;
    s.plan_rank = detail::plan_looped_bfs;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "interleaved-zb";
    s.aliases = {"InterleavedZeroBubble", "ScheduleInterleavedZeroBubble",
                 "interleaved-zero-bubble"};
    s.origin = "torch InterleavedZeroBubble (2.11), sail-sg ZB1P";
    s.description =
        "interleaved 1F1B with warmup (v-1)*mpr + (p-1-r), I instead of B, and the oldest "
        "pending W after each backward once rank r did r steady steps; W flushed at the end";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "any v >= 1; m divisible by max(1, m // p) (e.g. m % p == 0, or m <= p)";
    s.check_shape = detail::check_interleaved;
    s.plan_rank = detail::plan_interleaved_zb;
    s.lowering = latency_hiding();
  }
  // zero_bubble_torch.cc: torch's V-mapped schedules.
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "zbv";
    s.aliases = {"ZBVZeroBubble", "ScheduleZBVZeroBubble", "zb-v", "zero-bubble-v"};
    s.origin = "torch ZBVZeroBubble (2.11), sail-sg ZB-V";
    s.description =
        "V-shaped zero bubble: chunk 0 down, chunk 1 back up; F/I/W steady state planned "
        "for max(2p-1, m) microbatches, the extra ones dropped";
    s.mapping = StageMapping::V;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {2};
    s.constraints = "v = 2; any m";
    s.check_shape = detail::check_zbv;
    s.plan_rank = detail::plan_zbv;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "dualpipev";
    s.aliases = {"DualPipeV", "ScheduleDualPipeV", "dualpipe-v", "dual-pipe-v"};
    s.origin = "torch DualPipeV (2.11), DeepSeek DualPipeV";
    s.description =
        "DeepSeek's eight phases on a V: overlapped F+B pairs (OVERLAP_F_B) in the main "
        "phase, zero-bubble I/W split in the ramp and the drain";
    s.mapping = StageMapping::V;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {2};
    s.constraints = "v = 2; m >= 2p";
    s.check_shape = detail::check_dualpipev;
    s.plan_rank = detail::plan_dualpipev;
    s.lowering = latency_hiding();
  }
  // zero_bubble_sail.cc: sail-sg handcrafted zero-bubble schedules.
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "zb-h1";
    s.aliases = {"ZB-H1", "ZBH1", "ZeroBubbleH1", "zero-bubble-h1"};
    s.origin = "sail-sg zero-bubble-pipeline-parallelism (handcrafted ZB-H1)";
    s.description =
        "1F1B with the backward split into I and W; rank r defers its first r W "
        "into the drain, so the bubble shrinks to (p-1)(F+I-W) at 1F1B's memory";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 1;
    s.allowed_stages_per_rank = {1};
    s.constraints = "v = 1; m >= p";
    s.check_shape = detail::check_zb_h1;
    s.plan_rank = detail::plan_zb_h1;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "zb-h2";
    s.aliases = {"ZB-H2", "ZBH2", "ZeroBubbleH2", "zero-bubble-h2"};
    s.origin = "sail-sg zero-bubble-pipeline-parallelism (handcrafted ZB-H2)";
    s.description =
        "ZB-H1 with 2(p-r-1) warmup forwards (2p-1 in flight on rank 0) and the "
        "last 2r W flushed at the end: a parallelogram with no bubble inside";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 1;
    s.allowed_stages_per_rank = {1};
    s.constraints = "v = 1; m >= p";
    s.check_shape = detail::check_zb_h2;
    s.plan_rank = detail::plan_zb_h2;
    s.lowering = latency_hiding();
  }
  // vpp.cc: seed 002 (PaddlePaddle) virtual pipeline schedules.
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "vpp";
    s.aliases = {"VPP", "interleave", "PipelineParallelWithInterleave", "paddle-vpp"};
    s.origin = "seed 002 (Paddle PipelineParallelWithInterleave)";
    s.description =
        "interleaved 1F1B over v chunks; the first m%p+p microbatches pass each chunk "
        "in turn, then chunks rotate every p steps, so any m >= 2p works";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "v >= 2; p > 2; m >= 2p (any m % p)";
    s.check_shape = detail::check_vpp;
    s.plan_rank = detail::plan_vpp;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "vpp-fthenb";
    s.aliases = {"VPP-FthenB", "PipelineParallelWithInterleaveFthenB", "vpp-f-then-b",
                 "paddle-vpp-fthenb"};
    s.origin = "seed 002 (Paddle PipelineParallelWithInterleaveFthenB)";
    s.description = "every forward chunk by chunk, then every backward in reverse chunk order";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "v >= 2; p > 2; m % p == 0";
    s.check_shape = detail::check_vpp_fthenb;
    s.plan_rank = detail::plan_vpp_fthenb;
    s.lowering = latency_hiding();
  }
  {
    ScheduleInfo& s = t.emplace_back();
    s.name = "vpp-balanced";
    s.aliases = {"VPPFhenBInBalancedMemory", "VPPFthenBInBalancedMemory", "vpp-balanced-memory",
                 "paddle-vpp-balanced"};
    s.origin = "seed 002 (Paddle VPPFhenBInBalancedMemory)";
    s.description =
        "F-then-B over the first v-1 chunks, 1F1B on the last chunk, backwards in "
        "reverse chunk order (less live activation than vpp-fthenb)";
    s.mapping = StageMapping::Loop;
    s.default_stages_per_rank = 2;
    s.allowed_stages_per_rank = {};
    s.constraints = "v >= 2; p > 2; m % p == 0";
    s.check_shape = detail::check_vpp_balanced;
    s.plan_rank = detail::plan_vpp_balanced;
    s.lowering = latency_hiding();
  }
  return t;
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

PlanMeta resolve(const Problem& problem) {
  const ScheduleInfo& info = find_schedule(problem.schedule);
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
  meta.forward_only = problem.forward_only;
  return meta;
}

std::vector<Action> forward_order(const std::vector<Action>& compute) {
  std::vector<Action> out;
  out.reserve(compute.size() / 2 + 1);
  for (const Action& a : compute) {
    if (a.type == ActionType::F) out.push_back(a);
    else if (a.type == ActionType::OverlapFB)
      out.push_back(make(ActionType::F, a.stage, a.microbatch));
  }
  return out;
}

LowerOptions schedule_lowering(const PlanMeta& meta) {
  LowerOptions o = default_lowering(meta.schedule);
  if (!meta.forward_only) return o;
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
  if (both_ways) o.send_placement = SendPlacement::ParityStaggered;
  return o;
}

Plan plan_compute_rank(const Problem& problem, int rank) {
  PlanMeta meta = resolve(problem);
  if (rank < 0 || rank >= meta.pp_degree)
    throw InputError("rank " + std::to_string(rank) + " is out of range for pp_degree " +
                     std::to_string(meta.pp_degree) + " (valid: 0.." +
                     std::to_string(meta.pp_degree - 1) + ")");
  const ScheduleInfo& info = find_schedule(meta.schedule);
  Plan p;
  p.meta = meta;
  p.rank_ids = {rank};
  p.ranks.push_back(info.plan_rank(meta, rank));
  if (meta.forward_only) p.ranks.back() = forward_order(p.ranks.back());
  return p;
}

Plan plan_compute(const Problem& problem) {
  PlanMeta meta = resolve(problem);
  const ScheduleInfo& info = find_schedule(meta.schedule);
  Plan p;
  p.meta = meta;
  for (int r = 0; r < meta.pp_degree; ++r) {
    p.rank_ids.push_back(r);
    p.ranks.push_back(info.plan_rank(meta, r));
    if (meta.forward_only) p.ranks.back() = forward_order(p.ranks.back());
  }
  return p;
}

LowerOptions default_lowering(const std::string& schedule) {
  for (const auto& s : schedules()) {
    if (s.name == schedule) return s.lowering;
    for (const auto& alias : s.aliases)
      if (alias == schedule) return s.lowering;
  }
  return LowerOptions{};
}

Plan plan(const Problem& problem) {
  Plan compute = plan_compute(problem);
  return lower(compute, schedule_lowering(compute.meta));
}

Plan plan(const Problem& problem, const LowerOptions& options) {
  return lower(plan_compute(problem), options);
}

Plan plan_rank(const Problem& problem, int rank) {
  return plan_rank(problem, rank, schedule_lowering(resolve(problem)));
}

Plan plan_rank(const Problem& problem, int rank, const LowerOptions& options) {
  // Lowering orders each pair's transfers by a whole-pipeline timing, so one
  // rank's program needs every rank's compute order: plan all, keep one.
  Plan whole = plan(problem, options);
  if (rank < 0 || rank >= whole.meta.pp_degree)
    throw InputError("rank " + std::to_string(rank) + " is out of range for pp_degree " +
                     std::to_string(whole.meta.pp_degree) + " (valid: 0.." +
                     std::to_string(whole.meta.pp_degree - 1) + ")");
  Plan one;
  one.meta = whole.meta;
  one.rank_ids = {rank};
  one.ranks.push_back(std::move(whole.ranks[static_cast<std::size_t>(rank)]));
  return one;
}

}  // namespace pipeplan
