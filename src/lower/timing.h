// Internal: a unit-cost run of a compute-only order, shared by lower() and
// the text timeline. Data moves instantly; a compute starts when its rank is
// free and its producers finished.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::detail {

struct ComputeCosts {
  double f = 1.0, b = 2.0, i = 1.0, w = 1.0;
  double of(const Action& a) const;
};

/// Start/end of every compute action (comm and pass-through actions get the
/// time their rank reaches them and zero duration).
struct Timing {
  std::vector<std::vector<double>> start, end;  ///< [rank][index]; end may be empty
  bool complete = true;                         ///< false: some rank got stuck
  std::string stuck;  ///< when !complete: "rank R waits at A for P; ..."
};

/// Runs every rank of a whole plan in order. Linear in the number of actions.
/// Data dependencies are those of ir/deps.h (docs/semantics.md); RECVs
/// are ignored (the run is an eager, zero-latency ideal). `with_end` false
/// leaves `end` empty (lower() needs start times only).
Timing time_compute(const Plan& plan, const ComputeCosts& costs, bool with_end = true);

}  // namespace pipeplan::detail
