// Internal: where each (stage, microbatch) action sits in a whole plan.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/verify.h"

namespace pipeplan::detail {

/// Position (rank, index) of one action; rank -1 when absent.
struct Loc {
  std::int32_t rank = -1;
  std::int32_t index = -1;
  bool present() const { return rank >= 0; }
};

/// Dense per-(stage, microbatch) table of the action kinds a plan can hold.
enum Slot : int { kF, kB, kI, kW, kSendF, kRecvF, kSendB, kRecvB, kNumSlots };
/// Where a SEND/RECV slot sits in comm_count's block of 4 per stage.
inline std::size_t comm_slot(Slot k) { return static_cast<std::size_t>(k - kSendF); }
/// Decimal text of a count or index, for diagnostics.
inline std::string n2s(long long v) { return std::to_string(v); }

/// Slot of a plain action type (not OverlapFB/pass-through).
Slot slot_of(ActionType t);

/// Index of every action by (stage, microbatch, slot). Only actions on their
/// stage's own rank are recorded, so a slot stores just the index (4 bytes)
/// and the rank comes from the stage. Slots hold index + 1 in calloc'ed
/// memory: the table starts zeroed without a pass of its own.
class PlanIndex {
 public:
  int stages = 0, mbs = 0;
  std::vector<std::int32_t> rank_of;  ///< per stage
  /// SEND/RECV recorded per stage: [stage * 4 + comm_slot(slot)].
  std::vector<std::int32_t> comm_count;

  explicit PlanIndex(const PlanMeta& meta);
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  /// Whether the boundary s -> s+1 crosses ranks (0 <= s < stages - 1).
  bool crosses(int s) const {
    return rank_of[static_cast<std::size_t>(s)] != rank_of[static_cast<std::size_t>(s) + 1];
  }
  /// Index of slot k of (s, mb) on its rank, -1 when absent.
  std::int32_t raw(int s, int mb, Slot k) const { return cells_[cell(s, mb, k)] - 1; }
  void set(int s, int mb, Slot k, std::int32_t index) { cells_[cell(s, mb, k)] = index + 1; }
  /// First slot of (s, mb) (all kNumSlots of them are adjacent).
  const std::int32_t* row(int s, int mb) const { return &cells_[cell(s, mb, kF)]; }
  Loc at(int s, int mb, Slot k) const {
    const std::int32_t i = raw(s, mb, k);
    return i < 0 ? Loc{} : Loc{rank_of[static_cast<std::size_t>(s)], i};
  }

 private:
  struct Free {
    void operator()(std::int32_t* p) const { std::free(p); }
  };
  std::size_t cell(int s, int mb, Slot k) const {
    return (static_cast<std::size_t>(s) * static_cast<std::size_t>(mbs) + static_cast<std::size_t>(mb)) *
               kNumSlots + k;
  }
  std::unique_ptr<std::int32_t[], Free> cells_;
};

/// check_structure() that keeps the index it built for verify()'s progress
/// run (complete only when no diagnostic came back).
std::vector<Diagnostic> check_structure_indexed(const Plan& plan, std::size_t max_diagnostics,
                                                PlanIndex& index);

}  // namespace pipeplan::detail
