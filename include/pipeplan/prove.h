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

#include <optional>
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
/// prove() under one transport.
VerifyResult prove(const Plan& plan, Transport transport);

}  // namespace pipeplan
