// Internal: where each (stage, microbatch) action sits in a whole plan.
#pragma once

#include <cstdint>
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

/// Slot of a plain action type (not OverlapFB/pass-through).
Slot slot_of(ActionType t);

/// Index of every action by (stage, microbatch, slot). Only actions on their
/// stage's own rank are recorded, so a slot stores just the index (4 bytes)
/// and the rank comes from the stage.
struct PlanIndex {
  int stages = 0, mbs = 0;
  std::vector<std::int32_t> rank_of;  ///< per stage
  std::vector<std::int32_t> index;    ///< [(stage * mbs + mb) * kNumSlots + slot], -1 absent
  /// SEND/RECV recorded per stage: [stage * 4 + slot - kSendF].
  std::vector<std::int32_t> comm_count;

  explicit PlanIndex(const PlanMeta& meta);
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  /// Whether the boundary s -> s+1 crosses ranks (0 <= s < stages - 1).
  bool crosses(int s) const {
    return rank_of[static_cast<std::size_t>(s)] != rank_of[static_cast<std::size_t>(s) + 1];
  }
  std::int32_t& raw(int s, int mb, Slot k) {
    return index[(static_cast<std::size_t>(s) * mbs + mb) * kNumSlots + k];
  }
  std::int32_t raw(int s, int mb, Slot k) const {
    return index[(static_cast<std::size_t>(s) * mbs + mb) * kNumSlots + k];
  }
  Loc at(int s, int mb, Slot k) const {
    const std::int32_t i = raw(s, mb, k);
    return i < 0 ? Loc{} : Loc{rank_of[static_cast<std::size_t>(s)], i};
  }
};

/// check_structure() that keeps the index it built for verify()'s progress
/// run (complete only when no diagnostic came back).
std::vector<Diagnostic> check_structure_indexed(const Plan& plan, std::size_t max_diagnostics,
                                                PlanIndex& index);

}  // namespace pipeplan::detail
