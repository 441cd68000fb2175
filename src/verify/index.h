// Internal: where each (stage, microbatch) action sits in a whole plan.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/deps.h"
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
///
/// The dense table has stages x microbatches rows. A whole plan holds at
/// least one action per row (an OVERLAP_F_B covers an F and a B), so when the
/// plan has fewer actions than rows it cannot be complete and the index keeps
/// only the rows that occur (a hash map): memory follows the actions present,
/// never the shape a file declares.
class PlanIndex {
 public:
  int stages = 0, mbs = 0;
  /// Where each microbatch enters and leaves: its route's ends (PlanMeta::routes).
  deps::Ends ends{0};
  std::vector<std::int32_t> rank_of;  ///< per stage
  /// SEND/RECV recorded per stage: [stage * 4 + comm_slot(slot)].
  std::vector<std::int32_t> comm_count;
  /// Whether some rank holds a BATCH_P2P group (Action::batch_next).
  bool groups = false;

  /// `num_actions`: how many actions the plan holds (picks dense or sparse).
  PlanIndex(const PlanMeta& meta, std::size_t num_actions);
  /// Whether the table is dense (always so for a complete plan).
  bool dense() const { return cells_ != nullptr; }
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  /// Whether the boundary s -> s+1 crosses ranks (0 <= s < stages - 1).
  bool crosses(int s) const {
    return rank_of[static_cast<std::size_t>(s)] != rank_of[static_cast<std::size_t>(s) + 1];
  }
  /// Index of slot k of (s, mb) on its rank, -1 when absent.
  std::int32_t raw(int s, int mb, Slot k) const {
    if (cells_) return cells_[cell(s, mb, k)] - 1;
    return row(s, mb)[k] - 1;
  }
  void set(int s, int mb, Slot k, std::int32_t index) {
    if (cells_) cells_[cell(s, mb, k)] = index + 1;
    else sparse_[key(s, mb)][static_cast<std::size_t>(k)] = index + 1;
  }
  /// First slot of (s, mb) (all kNumSlots of them are adjacent).
  const std::int32_t* row(int s, int mb) const {
    if (cells_) return &cells_[cell(s, mb, kF)];
    auto it = sparse_.find(key(s, mb));
    return it == sparse_.end() ? kEmptyRow.data() : it->second.data();
  }
  Loc at(int s, int mb, Slot k) const {
    const std::int32_t i = raw(s, mb, k);
    return i < 0 ? Loc{} : Loc{rank_of[static_cast<std::size_t>(s)], i};
  }

 private:
  struct Free {
    void operator()(std::int32_t* p) const { std::free(p); }
  };
  std::size_t cell(int s, int mb, Slot k) const {
    return (static_cast<std::size_t>(s) * static_cast<std::size_t>(mbs) +
            static_cast<std::size_t>(mb)) *
               kNumSlots +
           k;
  }
  static std::uint64_t key(int s, int mb) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32 |
           static_cast<std::uint32_t>(mb);
  }
  using Row = std::array<std::int32_t, kNumSlots>;
  static constexpr Row kEmptyRow{};
  std::unique_ptr<std::int32_t[], Free> cells_;    ///< dense table, or null
  std::unordered_map<std::uint64_t, Row> sparse_;  ///< the rows present, when not dense
};

/// Throws InputError when the plan's shape or size is beyond limits.h (plans
/// built in code skip the readers' checks; the verifier refuses the same).
void check_plan_limits(const Plan& plan);

/// check_structure() that keeps the index it built for verify()'s progress
/// run (complete only when no diagnostic came back).
std::vector<Diagnostic> check_structure_indexed(const Plan& plan, std::size_t max_diagnostics,
                                                PlanIndex& index);

}  // namespace pipeplan::detail
