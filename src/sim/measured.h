// Internal: lookups shared by the trace checks, the step timelines and
// calibration.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/trace.h"

namespace pipeplan::detail {

/// An action's place in a plan; rank -1 when absent.
struct Loc {
  int rank = -1, index = -1;
};

/// Both ends of the value a SEND ships.
struct TransferEnds {
  Loc producer, consumer, recv;
};

/// Where every (stage, microbatch)'s forward and gradient compute sit.
class PlanLocations {
 public:
  explicit PlanLocations(const Plan& plan);
  Loc forward(int stage, int mb) const;
  /// B or I (or the backward half of an OVERLAP_F_B).
  Loc grad(int stage, int mb) const;
  /// The computes `a` consumes the outputs of.
  std::vector<Loc> producers(const Action& a) const;
  /// Producer, consumer and matching RECV of a SEND_F/SEND_B.
  TransferEnds ends_of_send(const Plan& plan, const Action& send) const;

 private:
  std::size_t key(int s, int mb) const {
    return static_cast<std::size_t>(s) * static_cast<std::size_t>(mbs_) +
           static_cast<std::size_t>(mb);
  }
  int mbs_ = 0, S_ = 0;
  std::vector<Loc> f_, g_;
};

/// The records of one step, by (rank, index); null where none.
class StepView {
 public:
  StepView(const Trace& trace, int step);
  bool complete() const;
  /// Precondition: complete().
  const TraceRecord& at(int rank, int index) const {
    return *at_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const TraceRecord* find(int rank, int index) const {
    return at_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }

 private:
  const Plan& plan_;
  std::vector<std::vector<const TraceRecord*>> at_;
};

}  // namespace pipeplan::detail
