// Internal: the per-schedule factories and shape checks that registry.cc
// puts into the one schedule table. Each family lives in its own file.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/ir.h"
#include "pipeplan/planner.h"

namespace pipeplan::detail {

/// Throws ShapeError("<schedule>: <what>", fix) when !ok; `fix` names the
/// shape parameters {p}, {m}, {v} (error.h).
void require(bool ok, const std::string& schedule, const std::string& what, const std::string& fix);

// registry.cc: a problem resolved against its table row; a schedule's own
// lowering applied to a shape (forward-only plans whose values cross a pair
// both ways get parity-staggered sends).
PlanMeta resolve_with(const ScheduleInfo& info, const Problem& problem);
LowerOptions lowering_of(LowerOptions own, const PlanMeta& meta);

// simple.cc: gpipe and 1f1b (seed 000).
std::vector<Action> plan_gpipe(const PlanMeta& meta, int rank);
std::vector<Action> plan_1f1b(const PlanMeta& meta, int rank);
void check_1f1b(const PlanMeta& meta);

// zero_bubble_sail.cc: sail-sg's handcrafted ZB-H1 and ZB-H2 (v = 1, F/I/W).
std::vector<Action> plan_zb_h1(const PlanMeta& meta, int rank);
void check_zb_h1(const PlanMeta& meta);
std::vector<Action> plan_zb_h2(const PlanMeta& meta, int rank);
void check_zb_h2(const PlanMeta& meta);

// vpp.cc: seed 002 (Paddle) virtual pipeline: interleave, F-then-B, balanced.
std::vector<Action> plan_vpp(const PlanMeta& meta, int rank);
void check_vpp(const PlanMeta& meta);
std::vector<Action> plan_vpp_fthenb(const PlanMeta& meta, int rank);
void check_vpp_fthenb(const PlanMeta& meta);
std::vector<Action> plan_vpp_balanced(const PlanMeta& meta, int rank);
void check_vpp_balanced(const PlanMeta& meta);

// interleaved.cc: torch's loop-mapped multi-stage schedules (any v >= 1).
std::vector<Action> plan_interleaved_1f1b(const PlanMeta& meta, int rank);
std::vector<Action> plan_interleaved_zb(const PlanMeta& meta, int rank);
/// Interleaved1F1B and InterleavedZeroBubble: m divisible by max(1, m / p).
void check_interleaved(const PlanMeta& meta);
std::vector<Action> plan_looped_bfs(const PlanMeta& meta, int rank);

// zero_bubble_torch.cc: torch's V-mapped schedules (v = 2): ZB-V, DualPipeV.
std::vector<Action> plan_zbv(const PlanMeta& meta, int rank);
void check_zbv(const PlanMeta& meta);
std::vector<Action> plan_dualpipev(const PlanMeta& meta, int rank);
/// DualPipeV: v = 2 and m >= 2 * pp_degree.
void check_dualpipev(const PlanMeta& meta);

// dualpipe.cc: DeepSeek's bidirectional DualPipe (v = 2, two routes).
std::vector<Action> plan_dualpipe(const PlanMeta& meta, int rank);
/// DualPipe: v = 2, p even, m even and m >= 2 * pp_degree.
void check_dualpipe(const PlanMeta& meta);
/// Microbatches 0..m/2-1 cross stages 0..p-1, the rest p..2p-1.
std::vector<Route> routes_dualpipe(const PlanMeta& meta);

// controllable_memory.cc: Qi et al.'s V-Half and V-Min as sail-sg builds
// them (v = 2, F/I/W; a stable pattern squeezed under a memory cap).
std::vector<Action> plan_v_half(const PlanMeta& meta, int rank);
void check_v_half(const PlanMeta& meta);
std::vector<Action> plan_v_min(const PlanMeta& meta, int rank);
void check_v_min(const PlanMeta& meta);

}  // namespace pipeplan::detail
