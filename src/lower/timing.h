// Internal: a cost-model run of a compute-only order, used by lower(), and
// the latest starts that keep its makespan: two policies of the execution
// core (run/core.h, run/values.h). A value crossing ranks arrives its
// transfer time after its producer ends; a compute starts when its rank is
// free and its inputs arrived (the eager bound of any lowering of the order).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// CostModel::duration() as a table per stage and type (no map lookup per
/// action); the same values, bit for bit.
class Durations {
 public:
  Durations(const CostModel& costs, int num_stages) : costs_(costs), stages_(num_stages) {
    table_.reserve(static_cast<std::size_t>(std::max(num_stages, 0)) * 4);
    for (int s = 0; s < num_stages; ++s) {
      auto it = costs.stage_scales.find(s);
      const StageScale k = it == costs.stage_scales.end() ? StageScale{} : it->second;
      table_.insert(table_.end(), {costs.f * k.f, costs.b * k.b, costs.i * k.i, costs.w * k.w});
    }
  }
  double operator()(const Action& a) const {
    auto of = [&](int stage, int type) {
      return stage >= 0 && stage < stages_ ? table_[static_cast<std::size_t>(stage) * 4 + type]
                                           : costs_.duration(a);
    };
    switch (a.type) {
      case ActionType::F: return of(a.stage, 0);
      case ActionType::B: return of(a.stage, 1);
      case ActionType::I: return of(a.stage, 2);
      case ActionType::W: return of(a.stage, 3);
      case ActionType::OverlapFB:
        if (costs_.overlap) return *costs_.overlap;
        if (a.stage < 0 || a.stage >= stages_ || a.sub_stage < 0 || a.sub_stage >= stages_)
          return costs_.duration(a);
        return of(a.stage, 0) + of(a.sub_stage, 1);
      case ActionType::Recompute: return costs_.duration(a);
      default: return 0.0;  // SEND/RECV, copies (not on the compute stream), pass-through
    }
  }

 private:
  const CostModel& costs_;
  int stages_;
  std::vector<double> table_;  // [stage][F, B, I, W]
};

/// Start/end of every compute action (comm and pass-through actions get the
/// time their rank reaches them and zero duration).
struct Timing {
  std::vector<std::vector<double>> start, end;  ///< [rank][index]; empty when not asked for
  bool complete = true;                         ///< false: some rank got stuck
  std::string stuck;                            ///< when !complete: "rank R waits at A for P; ..."
};

/// Runs every rank of a whole plan in order. Linear in the number of actions.
/// Cross-rank data dependencies are those of ir/deps.h (docs/semantics.md); RECVs
/// are ignored and a cross-rank value takes costs.transfer_time(). `fields`
/// says which of start and end to fill (the seed lowering needs start times,
/// the latency-hiding one end times).
enum class TimingFields : std::uint8_t { Start, End, Both };
Timing time_compute(const Plan& plan, const CostModel& costs,
                    TimingFields fields = TimingFields::Both);

/// Throws PlanRejected (a plan that cannot run: exit 1) with one
/// "compute-cycle" diagnostic naming the stuck ranks when `timing` did not
/// complete; returns otherwise.
void refuse_if_stuck(const Timing& timing);

}  // namespace pipeplan::detail

namespace pipeplan::detail {

class ProducerIndex;  // lower/producers.h

/// The latest start of every compute action that keeps `timing`'s makespan,
/// with each rank's order and the cross-rank transfer time fixed ([rank]
/// [index]; non-compute actions get their successor's). `producers` is
/// ProducerIndex(plan). Along a rank's list
/// it increases strictly when durations are positive, and it is never
/// before the action's start in `timing`. Precondition: `timing` is the
/// complete run of the same plan and costs, with end times. Linear.
std::vector<std::vector<double>> latest_starts(const Plan& plan, const CostModel& costs,
                                               const Timing& timing,
                                               const ProducerIndex& producers);

}  // namespace pipeplan::detail
