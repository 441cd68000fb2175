// make_lower_options: the lowering choices every front end offers, applied
// to a schedule's own lowering.
#include <string>

#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/planner.h"

namespace pipeplan {

LowerOptions make_lower_options(const PlanMeta& meta, const LoweringChoice& choice,
                                const CostModel& costs, bool comm_given) {
  if (choice.max_prefetch < 0)
    throw InputError("the prefetch cap must be >= 0 (0: no limit), got " +
                     std::to_string(choice.max_prefetch));
  LowerOptions o = schedule_lowering(meta);
  if (choice.mode) o.mode = *choice.mode;
  o.max_prefetch = choice.max_prefetch;
  if (choice.serial_safe) o.serial_safe = true;
  if (o.mode == LowerMode::LatencyHiding) {
    o.costs = costs;
    if (!comm_given && costs.transfer_time() == 0.0) {
      o.costs.comm_latency = kNominalLatency;
      o.costs.comm_bandwidth = 0.0;
    }
  }
  return o;
}

}  // namespace pipeplan
