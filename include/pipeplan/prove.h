// prove(): "is this plan safe under transport T?" in one call, whatever the
// plan holds. A compute-only plan is proved through its lowering, the
// program a runtime runs; a plan with comms is proved as written. Every
// front end asks it here: `pipeplan verify` and `plan`, the Python module's
// verify() and check(), the executor before it communicates.
//
// @code
//   Plan p = parse_plan(text, "plan.csv");           // io.h; compute-only or not
//   Proof proof = prove(p, {Transport::Rendezvous, Transport::Eager});
//   if (!proof.ok()) std::cerr << format_diagnostics(proof.results[0].diagnostics);
// @endcode
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/diagnostic.h"
#include "pipeplan/ir.h"
#include "pipeplan/lower.h"
#include "pipeplan/transport.h"
#include "pipeplan/verify.h"

namespace pipeplan {

/// A whole compute-only plan made runnable (lower_if_compute_only).
struct Lowered {
  /// The lowering; unset when the plan was not whole and compute-only, or
  /// could not be lowered (then `defects` says why).
  std::optional<Plan> plan;
  /// Why a whole compute-only plan cannot be lowered: its structural defects
  /// (check_structure), or one "compute-cycle" when its ranks wait on each
  /// other. Empty otherwise.
  std::vector<Diagnostic> defects;
};

/// A whole compute-only `plan` checked and lowered with `options` (its
/// schedule's own lowering, schedule_lowering, when unset); any other plan is
/// left as it is (no copy: `plan` unset, no defects) for verify() to judge.
/// Throws only what lower() throws for bad options (InputError).
Lowered lower_if_compute_only(const Plan& plan,
                              const std::optional<LowerOptions>& options = std::nullopt);

/// What prove() found: one verdict per transport asked, in that order.
struct Proof {
  std::vector<VerifyResult> results;
  /// The program proved when it is not the plan given: the lowering of a
  /// whole compute-only plan.
  std::optional<Plan> lowered;
  bool ok() const;
};

/// Proves `plan` under each of `transports`: a whole compute-only plan is
/// lowered first (lower_if_compute_only with `lowering`), and its defects,
/// when it cannot be, are every transport's verdict; any other plan is
/// verified as written (verify(): a partial plan gets "partial-plan").
/// Linear time per transport; never throws for a defective plan.
Proof prove(const Plan& plan, const std::vector<Transport>& transports,
            const std::optional<LowerOptions>& lowering = std::nullopt);
/// prove() under each of `targets` (a model with a runtime's rules,
/// verify_options()), in that order.
Proof prove(const Plan& plan, const std::vector<VerifyOptions>& targets,
            const std::optional<LowerOptions>& lowering = std::nullopt);
/// A runtime under which a plan is not deadlock-free, with its verdict.
struct RuntimeRefusal {
  Runtime runtime;
  VerifyResult result;
};
/// The first of `runtimes` under which `plan` (a whole compute-only one
/// proved through its lowering with `lowering`) is not deadlock-free.
std::optional<RuntimeRefusal> first_refusal(
    const Plan& plan, const std::vector<Runtime>& runtimes,
    const std::optional<LowerOptions>& lowering = std::nullopt);
/// Throws PlanRejected (the diagnostics): "`what` is not deadlock-free under
/// runtime NAME (MODEL transport, where it waits):" and the chain.
[[noreturn]] void reject_under(const RuntimeRefusal& refusal, const std::string& what);
/// "serial transport, each SEND/RECV waited where posted": a runtime's rules.
std::string describe_rules(const Runtime& runtime);

/// What lower_for_runtimes() kept.
struct RuntimeLowering {
  Plan plan;
  /// The runtime that refused the lowering asked for, when the serial-safe
  /// one was kept instead; "" when the lowering asked for passed.
  std::string serial_safe_for;
};
/// Lowers with `options` (`lower_with` lowers) and proves the result under
/// `runtimes`; when one refuses it and `may_retry` (the caller chose no
/// lowering), lowers it serial-safe (every rank's transfers in one order
/// its peers share: safe on one stream per rank and where each transfer is
/// waited where it stands) and keeps that when every runtime accepts it.
/// Throws reject_under(.., `what`) when still refused.
RuntimeLowering lower_for_runtimes(const std::function<Plan(const LowerOptions&)>& lower_with,
                                   const LowerOptions& options,
                                   const std::vector<Runtime>& runtimes, bool may_retry,
                                   const std::string& what);

/// prove() under one transport.
VerifyResult prove(const Plan& plan, Transport transport);

}  // namespace pipeplan
