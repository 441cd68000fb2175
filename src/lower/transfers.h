// Internal: the cross-rank transfers of a compute-only plan, grouped by
// direction (src rank -> dst rank) and kept in sigma order, 12 bytes each.
// Shared by lower()'s pair walk and its per-rank emission.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ir/deps.h"
#include "lower/producers.h"
#include "lower/timing.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// Sigma key of one transfer plus where it runs. Ordered by (consumer start
/// time, gradients first, sending stage, microbatch), as lower.h promises.
struct TransferKey {
  double tc = 0.0;
  bool grad = false;
  int send_stage = 0, mb = 0;
  int src = 0, dst = 0, consumer = 0;
  bool operator<(const TransferKey& o) const {
    if (tc != o.tc) return tc < o.tc;
    if (grad != o.grad) return grad;
    if (send_stage != o.send_stage) return send_stage < o.send_stage;
    return mb < o.mb;
  }
};

/// Every transfer of a compute-only plan. Transfer ids are dense; the ids of
/// one direction form a contiguous range in sigma order.
class Transfers {
 public:
  Transfers(const Plan& compute, const Timing& timing);

  /// Ids [begin, end) of direction d; empty for d < 0.
  std::pair<std::size_t, std::size_t> range(int d) const {
    if (d < 0) return {0, 0};
    return {dirs_[static_cast<std::size_t>(d)].begin, dirs_[static_cast<std::size_t>(d)].end};
  }
  /// The direction dst -> src of direction d, or -1 when there is none.
  int reverse(int d) const { return d < 0 ? -1 : dirs_[static_cast<std::size_t>(d)].rev; }
  /// Directions rank r sends on / receives on.
  const std::vector<int>& sends_of(int r) const { return sends_of_[static_cast<std::size_t>(r)]; }
  const std::vector<int>& recvs_of(int r) const { return recvs_of_[static_cast<std::size_t>(r)]; }

  /// Key of transfer t of direction d.
  TransferKey key(int d, std::size_t t) const;
  /// The key without its start time (tc = 0): enough to name the actions.
  TransferKey payload(int d, std::size_t t) const;
  /// Index of transfer t's consumer on its destination rank.
  int consumer(std::size_t t) const { return static_cast<int>(entries_[t].consumer >> 1); }
  /// Index of transfer t's producer on its source rank.
  int producer(std::size_t t) const { return entries_[t].producer; }
  /// The SEND of transfer t, named from its producer (an action of the
  /// sending rank, near where the send is emitted).
  Action send_action(int d, std::size_t t) const;
  std::uint32_t rank_length(int r) const {
    return static_cast<std::uint32_t>(plan_.ranks[static_cast<std::size_t>(r)].size());
  }
  /// Final send position, packed as slot << 2 | sub.
  std::uint32_t send_pos(std::size_t t) const { return send_pos_[t]; }
  void set_send_pos(std::size_t t, std::uint32_t p) { send_pos_[t] = p; }

  static Action send_action(const TransferKey& k) {
    return make(k.grad ? ActionType::SendB : ActionType::SendF, k.send_stage, k.mb);
  }
  static Action recv_action(const TransferKey& k) {
    return k.grad ? make(ActionType::RecvB, k.send_stage - 1, k.mb)
                  : make(ActionType::RecvF, k.send_stage + 1, k.mb);
  }

 private:
  struct Dir {
    int src = 0, dst = 0, rev = -1;
    std::size_t begin = 0, end = 0;
  };
  // Calls f(rank, index, from_stage, mb, grad) for every input a compute
  // action takes from another rank whose producer exists, in rank and
  // consumer order.
  template <typename F>
  void for_each_input(F&& f) const;
  int direction(int src, int dst, int from_stage, bool grad);
  // A transfer as stored: consumer index << 1 | grad, and producer index.
  struct Entry {
    std::uint32_t consumer = 0;
    std::int32_t producer = 0;
  };
  TransferKey key_of(const Dir& d, Entry e) const;
  TransferKey payload_of(const Dir& d, Entry e) const;
  int dir_of(int src, int dst) const;
  void sort_direction(const Dir& d);

  const Plan& plan_;
  const Timing& timing_;
  int stages_ = 0, mbs_ = 0;
  deps::Ends ends_{0};        // the microbatches' routes
  std::vector<int> rank_of_;  // per stage
  ProducerIndex producers_;
  std::vector<Dir> dirs_;
  std::map<std::pair<int, int>, int> dir_ids_;
  std::vector<std::pair<int, int>> memo_;  // per (from_stage, grad): (dst, direction)
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> send_pos_;
  std::vector<std::vector<int>> sends_of_, recvs_of_;
};

}  // namespace pipeplan::detail
