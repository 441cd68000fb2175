// verify(): structural checks and a progress proof under a transport model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/diagnostic.h"
#include "pipeplan/ir.h"
#include "pipeplan/transport.h"

namespace pipeplan {

struct VerifyOptions {
  Transport transport = Transport::Rendezvous;
  /// Stop collecting structural diagnostics after this many.
  std::size_t max_diagnostics = 50;
  /// The runtime's rules beside the model (pipeplan/transport.h); the
  /// default is the bare model's (receives waited before use, groups apart).
  RunRules rules{};
};

/// The options that prove a plan under runtime `rt`: its model and rules.
inline VerifyOptions verify_options(const Runtime& rt) {
  VerifyOptions o;
  o.transport = rt.model;
  o.rules = rt.rules;
  return o;
}

struct VerifyResult {
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return diagnostics.empty(); }
};

/// Counts, ranges, placement and dependency checks only (no simulation).
/// Works on compute-only plans (then comm checks are skipped) and on plans
/// with comms. Precondition: the plan is whole.
std::vector<Diagnostic> check_structure(const Plan& plan, std::size_t max_diagnostics = 50);

/// Structural checks, then (when they pass) a simulation proving every rank
/// reaches the end of its list under `options.transport`. Linear time.
/// Precondition: the plan is whole and has comms (lower() compute-only plans).
VerifyResult verify(const Plan& plan, const VerifyOptions& options = {});

/// "error[CODE] rank R index I (ACTION): MESSAGE" lines, one per diagnostic,
/// joined by newlines (none after the last: a message embeds it as is).
std::string format_diagnostics(const std::vector<Diagnostic>& diags);

}  // namespace pipeplan
