// Error types: one family under pipeplan::Error. Bad input is a typed
// exception with a location; plan defects found by verify() are Diagnostics
// (verify.h), never exceptions, until a runner refuses the plan
// (PlanRejected). Each type has one exit code, mapped in one place
// (exit_code() below): PlanRejected 1, InputError 2, InternalError 3,
// CommError 4.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/diagnostic.h"

namespace pipeplan {

/// Base of every exception pipeplan throws on purpose.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Bad user input: malformed file, unknown schedule, impossible shape.
/// Exit code 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what) {}
};

/// A shape the schedule cannot run (e.g. 1f1b with m < pp). Also exit 2.
/// Its fix names the shape's parameters as {p}, {m} and {v}: what() spells
/// them pp_degree, num_microbatches and stages_per_rank; a front end spells
/// them its own way with message() (the CLI: -p, -m, -v).
class ShapeError : public InputError {
 public:
  /// A refusal without a fix.
  explicit ShapeError(const std::string& problem) : InputError(problem), problem_(problem) {}
  ShapeError(const std::string& problem, const std::string& fix)
      : InputError(problem + "; " + spell(fix, "pp_degree", "num_microbatches", "stages_per_rank")),
        problem_(problem),
        fix_(fix) {}
  /// "<problem>; <fix>" with {p}, {m}, {v} replaced by `p`, `m`, `v`.
  std::string message(std::string_view p, std::string_view m, std::string_view v) const {
    return fix_.empty() ? problem_ : problem_ + "; " + spell(fix_, p, m, v);
  }

 private:
  static std::string spell(const std::string& text, std::string_view p, std::string_view m,
                           std::string_view v) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const bool slot = text[i] == '{' && i + 2 < text.size() && text[i + 2] == '}';
      const char k = slot ? text[i + 1] : '\0';
      if (k == 'p' || k == 'm' || k == 'v') {
        out += k == 'p' ? p : k == 'm' ? m : v;
        i += 2;
      } else {
        out += text[i];
      }
    }
    return out;
  }
  std::string problem_, fix_;
};

/// A plan a runner refuses because it fails verification; the message lists
/// the diagnostics. Exit code 1, like any plan that cannot run.
class PlanRejected : public Error {
 public:
  PlanRejected(const std::string& what, std::vector<Diagnostic> diagnostics)
      : Error(what), diagnostics_(std::move(diagnostics)) {}
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

/// A communication failure: a peer died or stalled past the timeout, or the
/// process group could not be formed. The message names the operation. Not a
/// plan defect: exit code 4.
class CommError : public Error {
 public:
  explicit CommError(const std::string& what) : Error(what) {}
};

/// A broken internal invariant (a pipeplan bug). Exit code 3.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& what) : Error(what) {}
};

/// The documented exit codes (README, docs/executor.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;   ///< PlanRejected: invalid or not deadlock-free
inline constexpr int kExitUsage = 2;     ///< InputError (ShapeError, BudgetError): usage or input
inline constexpr int kExitInternal = 3;  ///< InternalError, or anything unexpected
inline constexpr int kExitPeer = 4;      ///< CommError: a peer failed or communication broke

/// The exit code documented for `e`, as `pipeplan` and `pipeplan train` exit
/// with it: PlanRejected 1, InputError 2, CommError 4, anything else 3 (a
/// trainer embedding the executor exits the same way:
/// `catch (const std::exception& e) { return pipeplan::exit_code(e); }`).
inline int exit_code(const std::exception& e) noexcept {
  if (dynamic_cast<const PlanRejected*>(&e)) return kExitInvalid;
  if (dynamic_cast<const InputError*>(&e)) return kExitUsage;
  if (dynamic_cast<const CommError*>(&e)) return kExitPeer;
  return kExitInternal;
}

}  // namespace pipeplan
