// Internal: lookups shared by the trace checks, the step timelines and
// calibration. Each is built once per trace and answers in O(1), so the
// passes over a trace take time by its records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
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

/// Where every (stage, microbatch)'s forward and gradient compute and its
/// RECVs sit. Dense tables when the plan holds about as many actions as its
/// shape has (stage, microbatch) rows, else hash maps: memory follows the
/// actions present, not the shape a file declares.
class PlanLocations {
 public:
  explicit PlanLocations(const Plan& plan);
  Loc forward(int stage, int mb) const { return get(kForward, stage, mb); }
  /// B or I (or the backward half of an OVERLAP_F_B).
  Loc grad(int stage, int mb) const { return get(kGrad, stage, mb); }
  /// The computes `a` consumes the outputs of.
  std::vector<Loc> producers(const Action& a) const;
  /// Producer, consumer and matching RECV of a SEND_F/SEND_B.
  TransferEnds ends_of_send(const Action& send) const;

 private:
  enum Table : int { kForward, kGrad, kRecvF, kRecvB, kTables };
  Loc get(Table t, int s, int mb) const;
  void put(Table t, int s, int mb, Loc here);
  std::size_t key(int s, int mb) const {
    return static_cast<std::size_t>(s) * static_cast<std::size_t>(mbs_) +
           static_cast<std::size_t>(mb);
  }
  const Plan& plan_;
  int mbs_ = 0, S_ = 0;
  bool dense_ = true;
  std::vector<Loc> dense_tables_[kTables];
  std::unordered_map<std::uint64_t, Loc> sparse_[kTables];
};

/// A trace's records grouped by step, in trace order within a step.
class StepRecords {
 public:
  explicit StepRecords(const Trace& trace);
  using Range = std::pair<const TraceRecord* const*, const TraceRecord* const*>;
  /// The records of step `step` (empty when none).
  Range of(int step) const;

 private:
  std::vector<const TraceRecord*> sorted_;  // by step, stable
};

/// The records of one step, by (rank, index); null where none.
class StepView {
 public:
  explicit StepView(const Plan& plan);
  /// Holds the records of `step` alone (one pass over the trace).
  StepView(const Trace& trace, int step);
  /// Holds `records` (one step's), replacing what it held.
  void assign(StepRecords::Range records);
  bool complete() const;
  /// Precondition: complete().
  const TraceRecord& at(int rank, int index) const {
    return *at_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const TraceRecord* find(int rank, int index) const {
    return at_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }

 private:
  void put(const TraceRecord& rec);
  std::vector<std::vector<const TraceRecord*>> at_;
};

}  // namespace pipeplan::detail
