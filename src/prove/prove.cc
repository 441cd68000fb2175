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

Proof prove(const Plan& plan, const std::vector<VerifyOptions>& targets,
            const std::optional<LowerOptions>& lowering) {
  Proof proof;
  Lowered l = lower_if_compute_only(plan, lowering);
  if (!l.defects.empty()) {
    proof.results.assign(targets.size(), VerifyResult{l.defects});
    return proof;
  }
  proof.lowered = std::move(l.plan);
  const Plan& proved = proof.lowered ? *proof.lowered : plan;
  for (const VerifyOptions& o : targets) proof.results.push_back(verify(proved, o));
  return proof;
}

Proof prove(const Plan& plan, const std::vector<Transport>& transports,
            const std::optional<LowerOptions>& lowering) {
  std::vector<VerifyOptions> targets(transports.size());
  for (std::size_t i = 0; i < transports.size(); ++i) targets[i].transport = transports[i];
  return prove(plan, targets, lowering);
}

std::optional<RuntimeRefusal> first_refusal(const Plan& plan, const std::vector<Runtime>& runtimes,
                                            const std::optional<LowerOptions>& lowering) {
  if (runtimes.empty()) return std::nullopt;
  std::vector<VerifyOptions> targets;
  for (const Runtime& rt : runtimes) targets.push_back(verify_options(rt));
  Proof proof = prove(plan, targets, lowering);
  for (std::size_t i = 0; i < runtimes.size(); ++i)
    if (!proof.results[i].ok()) return RuntimeRefusal{runtimes[i], std::move(proof.results[i])};
  return std::nullopt;
}

std::string describe_rules(const Runtime& rt) {
  return std::string(to_string(rt.model)) + " transport, " +
         (rt.rules.waits == Waits::AtPost ? "each SEND/RECV waited where posted"
                                          : "receives waited before use") +
         (rt.rules.groups_apart ? ", groups on a communicator of their own" : "");
}

void reject_under(const RuntimeRefusal& refusal, const std::string& what) {
  throw PlanRejected(
      what + " is not deadlock-free under runtime '" + std::string(refusal.runtime.name) + "' (" +
          describe_rules(refusal.runtime) + "):\n" + format_diagnostics(refusal.result.diagnostics),
      refusal.result.diagnostics);
}

RuntimeLowering lower_for_runtimes(const std::function<Plan(const LowerOptions&)>& lower_with,
                                   const LowerOptions& options,
                                   const std::vector<Runtime>& runtimes, bool may_retry,
                                   const std::string& what) {
  RuntimeLowering out{lower_with(options), {}};
  std::optional<RuntimeRefusal> refused = first_refusal(out.plan, runtimes);
  if (!refused) return out;
  if (may_retry && !options.serial_safe) {
    LowerOptions safe = options;
    safe.serial_safe = true;
    std::optional<Plan> retry;
    try {
      retry = lower_with(safe);
    } catch (const InputError&) {  // a lowering mode that takes no serial-safe order
    }
    if (retry && !first_refusal(*retry, runtimes))
      return RuntimeLowering{std::move(*retry), std::string(refused->runtime.name)};
  }
  reject_under(*refused, what);
}

VerifyResult prove(const Plan& plan, Transport transport) {
  return std::move(prove(plan, std::vector<Transport>{transport}).results.front());
}

}  // namespace pipeplan
