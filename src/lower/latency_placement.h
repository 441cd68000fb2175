// Internal: the latency-hiding lowering's placement (latency.cc, phase 3):
// where each pair end posts its transfers, given the order its history
// takes them in, and the lowered programs.
#pragma once

#include <cstdint>
#include <vector>

#include "lower/latency_transfers.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail::hiding {

// Phase 3: where each end posts its transfers (positions in its rank's
// list, given the order its history takes them in), and the programs.
class Placement {
 public:
  Placement(const Plan& plan, Transfers& t) : plan_(plan), t_(t), histories_(plan.ranks.size()) {}

  // Fixes the positions of rank r's side of every op of one history (ops:
  // transfer id << 1 | 1 for a send), and keeps the history.
  void walk_history(int r, std::vector<std::uint32_t> ops);

  // Both ends of the pair of directions d0 (and d1, its reverse, or -1) post
  // their transfers in `order` (id << 1 | 1 when it goes from the lower rank
  // to the higher).
  void walk_ends(int d0, int d1, const std::vector<std::uint32_t>& order);

  Plan emit_plan() const;

 private:
  static Action send_action(const Xfer& x);
  static Action recv_action(const Xfer& x);

  // Rank r's program: compute actions with its ops merged in by position
  // (each history is sorted by position; ties across histories by key).
  std::vector<Action> emit(int r) const;

  const Plan& plan_;
  Transfers& t_;
  // Per rank: its histories (pair ends, or one with serial_safe), each the
  // ops it posts there in order (id << 1 | 1 for a send).
  std::vector<std::vector<std::vector<std::uint32_t>>> histories_;
  std::vector<std::uint32_t> limit_;  // scratch of walk_history
};

}  // namespace pipeplan::detail::hiding
