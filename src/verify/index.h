// Internal: where each (stage, microbatch) action sits in a whole plan.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeplan/ir.h"

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

struct PlanIndex {
  int stages = 0, mbs = 0;
  std::vector<Loc> loc;  ///< [(stage * mbs + mb) * kNumSlots + slot]
  PlanIndex(int s, int m) : stages(s), mbs(m), loc(static_cast<std::size_t>(s) * m * kNumSlots) {}
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  Loc& at(int s, int mb, Slot k) {
    return loc[(static_cast<std::size_t>(s) * mbs + mb) * kNumSlots + k];
  }
  const Loc& at(int s, int mb, Slot k) const {
    return loc[(static_cast<std::size_t>(s) * mbs + mb) * kNumSlots + k];
  }
};

}  // namespace pipeplan::detail
