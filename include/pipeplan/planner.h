// The schedule table and the planner entry points.
#pragma once

#include <functional>
#include <optional>
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
  /// order; the rest: latency hiding for the nominal cost model, with
  /// serial_safe for the loop-mapped multi-stage schedules, whose per-pair
  /// orders would hang under serial). Every default plan is deadlock-free
  /// under all three transport models.
  LowerOptions lowering;
  /// The microbatch routes of a shape (PlanMeta::routes); empty (the
  /// default): every microbatch crosses every stage. Pure.
  std::function<std::vector<Route>(const PlanMeta&)> routes;
};

/// The schedule table, in display order.
const std::vector<ScheduleInfo>& schedules();
/// Finds a schedule by name or alias (case-insensitive, '_' == '-'); throws
/// InputError listing the names, with a "did you mean" when one is close.
const ScheduleInfo& find_schedule(const std::string& name);

/// Resolves defaults (v) and checks the shape; throws ShapeError/InputError.
PlanMeta resolve(const Problem& problem);

/// How lower() places transfers for a plan of this shape: the schedule's
/// own options (defaults for an unknown name). A forward-only plan whose
/// forward values flow both ways between some rank pair (V mapping, or the
/// wrap-around of a loop mapping with v > 1 on 2 ranks) gets parity-staggered
/// sends, so that the two ends never both send first.
LowerOptions schedule_lowering(const PlanMeta& meta);
/// The lowering options of a schedule (name or alias as written in a plan's
/// metadata); for a custom plan, LowerOptions{} (latency hiding).
LowerOptions default_lowering(const std::string& schedule);

/// How a compute order is to be lowered, as every front end offers the
/// choice: the CLI's --lowering, --prefetch, --serial-safe, --batch-p2p (and
/// whether --comm was given), the Python keywords lowering=, prefetch=,
/// serial_safe=, batch_p2p= (and comm=), compare's and search's defaults. Applied to the schedule's
/// own lowering (schedule_lowering).
struct LoweringChoice {
  std::optional<LowerMode> mode;  ///< unset: the schedule's own
  int max_prefetch = 0;           ///< LowerOptions::max_prefetch; 0: no limit
  /// true forces it; false keeps the schedule's own (ScheduleInfo::lowering)
  /// where it plans for the nominal costs in latency-hiding mode, and drops
  /// it for stated costs or another mode (per-pair orders, searched).
  bool serial_safe = false;
  /// The batched lowering (LowerOptions::batch_p2p; the CLI's --batch-p2p,
  /// Python's batch_p2p=): seed placement with BATCH_P2P groups. Refused
  /// with a mode other than Seed or a prefetch cap (InputError).
  bool batch_p2p = false;
  /// The user stated the transfer cost (--comm, comm=), a free one included.
  /// When not, and the cost model makes transfers free, a latency-hiding
  /// lowering plans for kNominalLatency per transfer: real ones never are.
  bool transfer_cost_stated = false;
};

/// Throws InputError for a choice no plan lowers with: a negative prefetch
/// cap, or batch_p2p with a mode other than Seed or a prefetch cap.
/// lower_options() and Planner::lowering() check it; so does compare, once.
void check_lowering_choice(const LoweringChoice& choice);

/// The cost model a latency-hiding lowering plans for: `costs`, with
/// kNominalLatency per transfer when they make transfers free and `choice`
/// does not state the transfer cost (the one nominal-latency rule).
CostModel planning_costs(const CostModel& costs, const LoweringChoice& choice = {});

/// How to lower a plan of `meta`: the schedule's own options
/// (schedule_lowering; the general rule for a custom plan) with `choice`
/// applied, a latency-hiding lowering planning for planning_costs(costs,
/// choice). Throws InputError as check_lowering_choice().
LowerOptions lower_options(const PlanMeta& meta, const LoweringChoice& choice,
                           const CostModel& costs);

/// One problem resolved once (its schedule row found, defaults filled, the
/// shape checked: resolve()) and planned from there, so a front end that
/// needs the shape, the lowering and the plan looks the schedule up once.
class Planner {
 public:
  /// Throws ShapeError/InputError as resolve() does.
  explicit Planner(const Problem& problem);
  const PlanMeta& meta() const { return meta_; }
  const ScheduleInfo& schedule() const { return *info_; }
  /// How this problem's compute order lowers with `choice`, planning for
  /// `costs` (lower_options).
  LowerOptions lowering(const LoweringChoice& choice = {}, const CostModel& costs = {}) const;
  /// Compute-only order of every rank / of one rank (a Plan holding it alone).
  Plan compute() const;
  Plan compute_rank(int rank) const;
  /// The compute order lowered with `options`; of every rank / of one rank.
  Plan plan(const LowerOptions& options) const;
  Plan plan_rank(int rank, const LowerOptions& options) const;

 private:
  PlanMeta meta_;
  const ScheduleInfo* info_ = nullptr;
};

/// Compute-only plan of every rank. Throws on a bad problem.
Plan plan_compute(const Problem& problem);
/// Compute-only plan of one rank (a Plan holding only that rank).
Plan plan_compute_rank(const Problem& problem, int rank);

/// Planned and lowered (with comms) plan of every rank.
Plan plan(const Problem& problem);
/// Planned plan of every rank, lowered with `options` (e.g. default_lowering
/// with the caller's cost model).
Plan plan(const Problem& problem, const LowerOptions& options);
/// Planned plan of every rank, lowered as `choice` says for `costs`: what
/// the CLI's `plan` and the Python module's plan() ask for.
Plan plan(const Problem& problem, const LoweringChoice& choice, const CostModel& costs);
/// Planned and lowered plan of one rank only.
Plan plan_rank(const Problem& problem, int rank);
/// Planned plan of one rank only, lowered with `options`.
Plan plan_rank(const Problem& problem, int rank, const LowerOptions& options);

}  // namespace pipeplan
