// The cost model: per-type and per-stage durations and the transfer time.
#include "pipeplan/costs.h"

namespace pipeplan {
namespace {

const StageScale kUnitScale{};

const StageScale& scale_of(const CostModel& c, int stage) {
  auto it = c.stage_scales.find(stage);
  return it == c.stage_scales.end() ? kUnitScale : it->second;
}

}  // namespace

double CostModel::duration(const Action& a) const {
  switch (a.type) {
    case ActionType::F: return f * scale_of(*this, a.stage).f;
    case ActionType::B: return b * scale_of(*this, a.stage).b;
    case ActionType::I: return i * scale_of(*this, a.stage).i;
    case ActionType::W: return w * scale_of(*this, a.stage).w;
    case ActionType::OverlapFB:
      if (overlap) return *overlap;
      return f * scale_of(*this, a.stage).f + b * scale_of(*this, a.sub_stage).b;
    case ActionType::Recompute:
      if (!stage_recompute.empty() && a.stage >= 0 &&
          static_cast<std::size_t>(a.stage) < stage_recompute.size())
        return stage_recompute[static_cast<std::size_t>(a.stage)];
      return f * scale_of(*this, a.stage).f;
    default: return 0.0;
  }
}

double CostModel::transfer_time() const {
  if (comm_bandwidth > 0 && transfer_bytes > 0)
    return comm_latency + transfer_bytes / comm_bandwidth;
  return comm_latency;
}

CostModel cost_model_of(const StageCosts& file) {
  CostModel c;
  c.stage_scales = file.stages;
  c.unmeasured = file.unmeasured;
  if (file.absolute) c.f = c.b = c.i = c.w = 1.0;
  if (file.comm_latency) c.comm_latency = *file.comm_latency;
  if (file.comm_bandwidth) c.comm_bandwidth = *file.comm_bandwidth;
  if (file.transfer_bytes) c.transfer_bytes = *file.transfer_bytes;
  return c;
}

}  // namespace pipeplan
