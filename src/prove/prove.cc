// prove() and lower_if_compute_only(): the one "lower a compute-only plan,
// then verify" of every front end.
#include "pipeplan/prove.h"

#include <algorithm>

#include "pipeplan/error.h"
#include "pipeplan/planner.h"

namespace pipeplan {

Lowered lower_if_compute_only(const Plan& plan, const std::optional<LowerOptions>& options) {
  Lowered out;
  if (!plan.is_whole() || !plan.is_compute_only()) return out;
  out.defects = check_structure(plan);
  if (!out.defects.empty()) return out;
  try {
    out.plan = lower(plan, options ? *options : schedule_lowering(plan.meta));
  } catch (const PlanRejected& e) {
    // Ranks that wait on each other: the plan cannot run, whatever the
    // transport (lower() names the stuck ranks).
    out.defects = e.diagnostics();
  }
  return out;
}

bool Proof::ok() const {
  return std::all_of(results.begin(), results.end(), [](const VerifyResult& r) { return r.ok(); });
}

Proof prove(const Plan& plan, const std::vector<Transport>& transports,
            const std::optional<LowerOptions>& lowering) {
  Proof proof;
  Lowered l = lower_if_compute_only(plan, lowering);
  if (!l.defects.empty()) {
    proof.results.assign(transports.size(), VerifyResult{l.defects});
    return proof;
  }
  proof.lowered = std::move(l.plan);
  const Plan& proved = proof.lowered ? *proof.lowered : plan;
  for (Transport t : transports) {
    VerifyOptions o;
    o.transport = t;
    proof.results.push_back(verify(proved, o));
  }
  return proof;
}

VerifyResult prove(const Plan& plan, Transport transport) {
  return std::move(prove(plan, std::vector<Transport>{transport}).results.front());
}

}  // namespace pipeplan
