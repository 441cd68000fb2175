// Internal: the verifier's rules for the memory actions OFFLOAD, RELOAD and
// RECOMPUTE (docs/memory.md): where each sits, and its order against the F
// and the backward (B, I, or an OVERLAP_F_B's backward) of its (stage,
// microbatch) and against the other memory actions of it. They never cross
// ranks, so the progress proof does not see them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/diagnostic.h"
#include "pipeplan/ir.h"
#include "verify/index.h"

namespace pipeplan::detail {

/// The memory actions of a plan by (stage, microbatch): a small table beside
/// PlanIndex (plans without memory actions never allocate it).
class MemoryIndex {
 public:
  /// Records memory action `a` (in range, on its stage's rank) at `index`
  /// of its rank; returns the index of the same action recorded before, or
  /// -1 (then it is recorded).
  std::int32_t record(const Action& a, int index);
  bool empty() const { return rows_.empty(); }
  /// Index of `type` (a memory action) of (s, mb) on its rank, -1 when absent.
  std::int32_t at(ActionType type, int s, int mb) const;

 private:
  static std::uint64_t key(int s, int mb) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32 |
           static_cast<std::uint32_t>(mb);
  }
  static std::size_t slot(ActionType t) {
    return static_cast<std::size_t>(t) - static_cast<std::size_t>(ActionType::Offload);
  }
  using Row = std::array<std::int32_t, 3>;  // OFFLOAD, RELOAD, RECOMPUTE; -1 absent
  std::unordered_map<std::uint64_t, Row> rows_;
};

/// The order rules of every memory action of `plan`, in rank and list
/// order: OFFLOAD after its F and before its backward, with a RELOAD;
/// RELOAD after its OFFLOAD and before the backward; RECOMPUTE after the F
/// (and after the RELOAD when both are present) and before the backward.
/// Precondition: every action is in range and on its rank (the structure
/// scan recorded them in `index` and `memory`). At most `max` diagnostics.
std::vector<Diagnostic> check_memory_order(const Plan& plan, const PlanIndex& index,
                                           const MemoryIndex& memory, std::size_t max);

}  // namespace pipeplan::detail
