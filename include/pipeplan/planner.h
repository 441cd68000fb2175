// The schedule table and the planner entry points.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/lower.h"
#include "pipeplan/problem.h"

namespace pipeplan {

/// One row of the schedule table; `pipeplan list`, docs and tests read it.
struct ScheduleInfo {
  std::string name;                  ///< canonical name, e.g. "1f1b"
  std::vector<std::string> aliases;  ///< other accepted names, e.g. "Schedule1F1B"
  std::string origin;                ///< where the order comes from
  std::string description;
  StageMapping mapping = StageMapping::Loop;
  int default_stages_per_rank = 1;
  std::vector<int> allowed_stages_per_rank;  ///< empty: any v >= 1
  std::string constraints;                   ///< human-readable shape constraints
  /// Throws ShapeError naming the violated constraint and a fix.
  std::function<void(const PlanMeta&)> check_shape;
  /// Compute-only order (F, B, I, W, OVERLAP_F_B) of one rank. Pure.
  std::function<std::vector<Action>(const PlanMeta&, int rank)> plan_rank;
  /// How lower() lowers this schedule by default (gpipe/1f1b: the seed's
  /// order; the rest: latency hiding for the nominal cost model, serial-safe).
  LowerOptions lowering;
};

/// The schedule table, in display order.
const std::vector<ScheduleInfo>& schedules();
/// Finds a schedule by name or alias (case-insensitive, '_' == '-'); throws
/// InputError listing the names, with a "did you mean" when one is close.
const ScheduleInfo& find_schedule(const std::string& name);

/// Resolves defaults (v) and checks the shape; throws ShapeError/InputError.
PlanMeta resolve(const Problem& problem);

/// The forward-only order of a compute order: its F actions in order (the
/// forward half of an OVERLAP_F_B included), every backward dropped. This is
/// what a forward-only (`Problem::forward_only`) plan of the schedule runs.
std::vector<Action> forward_order(const std::vector<Action>& compute);

/// How lower() places transfers for a plan of this shape: the schedule's
/// own options (defaults for an unknown name). A forward-only plan whose
/// forward values flow both ways between some rank pair (V mapping, or the
/// wrap-around of a loop mapping with v > 1 on 2 ranks) gets parity-staggered
/// sends, so that the two ends never both send first.
LowerOptions schedule_lowering(const PlanMeta& meta);

/// Compute-only plan of every rank. Throws on a bad problem.
Plan plan_compute(const Problem& problem);
/// Compute-only plan of one rank (a Plan holding only that rank).
Plan plan_compute_rank(const Problem& problem, int rank);
/// The lowering options of a schedule (name or alias as written in a plan's
/// metadata); for a custom plan, LowerOptions{} (latency hiding).
LowerOptions default_lowering(const std::string& schedule);

/// Planned and lowered (with comms) plan of every rank.
Plan plan(const Problem& problem);
/// Planned plan of every rank, lowered with `options` (e.g. default_lowering
/// with the caller's cost model).
Plan plan(const Problem& problem, const LowerOptions& options);
/// Planned and lowered plan of one rank only.
Plan plan_rank(const Problem& problem, int rank);
/// Planned plan of one rank only, lowered with `options`.
Plan plan_rank(const Problem& problem, int rank, const LowerOptions& options);

}  // namespace pipeplan
