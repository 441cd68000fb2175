// Internal: the simulation engine shared by simulate.cc (checks, ranks,
// computes), transport.cc (posting and matching SEND/RECV, stuck reports)
// and transfer_order.cc (the transfer list in time order).
//
// One pass over the plan: an action is checked, and claims its records, when
// its rank first reaches it. Memory besides the result is one 32-byte record
// per (stage, microbatch) and one 16-byte record per transfer; posted
// operations live only in short queues until they match, and when an op was
// posted or completed is read back from the result's timeline.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/simulate.h"

namespace pipeplan::detail {

/// A first-in first-out queue on one vector: popping advances a head that
/// is reclaimed when the queue empties or the dead prefix dominates.
template <class T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  const T& front() const { return items_[head_]; }
  const T& operator[](std::size_t i) const { return items_[head_ + i]; }
  void pop() { ++head_; }
  void push(const T& x) {
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 64 && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    items_.push_back(x);
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

class Engine {
 public:
  Engine(const Plan& plan, const SimOptions& options);
  SimResult run();

 private:
  static constexpr double kUnknown = -1.0;  // every real time is >= 0
  static constexpr std::size_t kMaxProblems = 20;
  static constexpr std::size_t kPrefetchPlan = 24, kPrefetchKey = 12;  // actions ahead
  static constexpr std::uint32_t kHopBlock = 4096;  // transfers per storage block

  struct Loc {
    int rank = -1, index = -1;
  };
  struct RankState {
    std::size_t next = 0;     // index of the action to run next (all before it were posted or ran)
    std::size_t checked = 0;  // actions checked and recorded (next, or one past it)
    bool halted = false;      // stopped at an action that failed its check
    double host = 0.0;        // when the host reaches `next` (it blocks only on receives)
    double cursor = 0.0;      // when the compute stream is free
    double busy = 0.0, first_start = 0.0, last_end = 0.0;
    std::size_t computes = 0;
    int live = 0, peak = 0;
    double memory = 0.0, peak_memory = 0.0;  // live activations weighted by stage size
    int buffers = 0, peak_buffers = 0;       // RECVs posted whose consumer has not run
    bool queued = false;
  };
  // Per (stage, microbatch): when its F and B-or-I ended, and where they and
  // its RECVs sit (indices on the owning rank; -1: absent). RECVs are keyed
  // by the receiving side's (stage, microbatch): [0] receives the forward
  // value, [1] the gradient. 32 bytes: a record never straddles cache lines.
  struct alignas(32) KeyState {
    double f_end = kUnknown, bi_end = kUnknown;
    std::int32_t f_at = -1, bi_at = -1;
    std::int32_t recv_at[2] = {-1, -1};
  };
  // Per key (the receiving side's for SENDs): which SENDs and which W were
  // met, to reject a second one.
  enum : std::uint8_t { kSeenSendF = 1, kSeenSendB = 2, kSeenW = 4 };
  // A posted SEND or RECV waiting for its partner. `tag` is key*4 + dir*2 +
  // send, so two ops are complementary when their tags differ in bit 0 only.
  struct Posted {
    double ready;  // when its data may start moving (a send waits for its producer)
    std::uint64_t tag;
    std::int32_t index;
    std::uint32_t seq;  // global posting order, for reports
  };
  // One side of a rank pair: what its rank posted toward the other side,
  // and the transfers it sent (blocks of hop_blocks_, in start order).
  struct End {
    int rank = 0;
    int posted = 0;  // ops ever posted; the queue holds the unmatched tail
    Fifo<Posted> queue;
    std::vector<std::uint32_t> blocks;
    std::uint32_t fill = kHopBlock;  // hops in the last block
  };
  // Rank pair (lo < hi); its ends are ends_[2 * id] (lo) and [2 * id + 1].
  struct Pair {
    int lo, hi;
    double last_end = 0.0;  // rendezvous: the pair's stream is free
    bool broken = false;    // a non-complementary position was met
  };
  // Serial model: the ends of every op a rank posted, in posting order.
  struct Stream {
    Fifo<int> ends;
    double last_end = 0.0;
  };
  // Eager model: an op posted before its partner (kept to report it).
  struct Pending {
    std::uint32_t seq;
    std::int32_t rank, index;
  };
  // One transfer, recorded on its sending end (ranks are the end's).
  // `value` is the receiving side's key * 2 + (1 for a gradient); the
  // receiver, producer and consumer are read from its records when the list
  // is built (the consumer may not have been reached when the value lands).
  struct Hop {
    double start;
    std::int32_t src_index;
    std::uint32_t value;
  };
  // A posted op that never completed, gathered for the final report.
  struct Unmatched {
    std::uint32_t seq;
    int rank, index, end, pos;  // end/pos: -1 under eager
  };

  // Microbatch-major: the microbatches in flight are a window of the table
  // whatever the plan's length, and a value's neighbour stage is next door.
  std::size_t key(int stage, int mb) const {
    return static_cast<std::size_t>(mb) * static_cast<std::size_t>(num_stages_) +
           static_cast<std::size_t>(stage);
  }
  // The key of the value a RECV of `k` carries is produced at: the stage
  // below (forward) or above (gradient).
  static std::size_t producer_key(std::size_t k, bool fwd) { return fwd ? k - 1 : k + 1; }
  bool in_range(int stage, int mb) const {
    return stage >= 0 && stage < num_stages_ && mb >= 0 && mb < num_mb_;
  }
  int rank_of(int stage) const { return stage_rank_[static_cast<std::size_t>(stage)]; }
  // The end through which `rank` talks across boundary b (stages b, b+1).
  int end_of(int boundary, int rank) const {
    const int pair = boundary_pair_[static_cast<std::size_t>(boundary)];
    return 2 * pair + (rank == pairs_[static_cast<std::size_t>(pair)].lo ? 0 : 1);
  }
  // Whether rank's action `index` was posted (comm) or ran (compute).
  bool passed(int rank, int index) const {
    return index >= 0 &&
           static_cast<std::size_t>(index) < ranks_[static_cast<std::size_t>(rank)].next;
  }
  // The timeline of a passed action (a rank's timeline grows as it runs).
  ActionTime& time_at(int rank, int index) {
    return result_.times[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const ActionTime& time_at(int rank, int index) const {
    return result_.times[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  // Asks for the records an upcoming action will touch: its plan entry (a
  // few actions further) and its (stage, microbatch) record. Ranks take
  // turns every few actions, which hides their streams from the hardware.
  void prefetch_ahead(const std::vector<Action>& list, std::size_t i) const {
    if (i + kPrefetchPlan < list.size()) __builtin_prefetch(&list[i + kPrefetchPlan]);
    if (i + kPrefetchKey < list.size()) prefetch_key(list[i + kPrefetchKey]);
  }
  // The action's record and its neighbour stages' (a value's producer): two
  // cache lines hold all three.
  void prefetch_key(const Action& a) const {
    if (!in_range(a.stage, a.microbatch)) return;
    const std::size_t k = key(a.stage, a.microbatch);
    __builtin_prefetch(&keys_[k > 0 ? k - 1 : k]);
    __builtin_prefetch(&keys_[k + 1 < keys_.size() ? k + 1 : k]);
  }
  // Validation: fast checks inline, messages out of line.
  bool placed(int rank, int index, const Action& a, int stage, int mb) {
    if (in_range(stage, mb) && rank_of(stage) == rank) return true;
    misplaced(rank, index, a, stage, mb);
    return false;
  }
  bool claim(std::int32_t& slot, int stage, int mb, int rank, int index, const Action& a,
             const char* what) {
    if (slot < 0) {
      slot = index;
      return true;
    }
    duplicate(slot, stage, mb, rank, index, a, what);
    return false;
  }

  // simulate.cc
  void make_pairs();
  bool check_rest();
  bool validate_action(int rank, int index, const Action& a);
  void misplaced(int rank, int index, const Action& a, int stage, int mb);
  void duplicate(int first, int stage, int mb, int rank, int index, const Action& a,
                 const char* what);
  bool claim_w(int rank, int index, const Action& a);
  void bad(int rank, int index, const Action& a, const std::string& message);
  void wake(int rank);
  void drain();
  void advance(int rank);
  // Inputs: the time a value is there, kUnknown when not yet; `from` notes a
  // compute-only cross-rank producer, `received` whether a RECV delivers it.
  double forward_input(int stage, int mb, int rank, Loc* from, bool* received);
  double grad_input(int stage, int mb, int rank, Loc* from, bool* received);
  double received(int dir, std::size_t k, int rank) const;
  bool ready_time(const Action& a, int rank, Loc implicit[2], double* data, double* received);
  void complete_compute(int rank, const Action& a, double end);
  void add_implicit_transfer(int boundary, Loc producer, int stage, int mb, bool fwd);

  // transport.cc
  void post(int rank, int index, const Action& a, double ready);
  void settle(int send_rank, int send_index, int send_end, int recv_rank, int recv_index,
              std::uint64_t tag, double start);
  void try_pair(int pair);
  void try_serial(int rank);
  void mismatch(Pair& p, int x_end, int y_end);
  void finish();
  std::vector<Unmatched> unmatched_ops() const;
  int find_posted(int end, int index) const;
  void report_stuck_rank(int rank);
  std::string why_not_received(int dir, std::size_t key, int rank);
  std::string peer_state(int rank) const;
  std::string describe(int rank, int index) const;
  std::string action_at(int rank, int index) const;

  // transfer_order.cc
  void add_hop(int end, const Hop& hop);
  void order_transfers();

  const Plan& plan_;
  const PlanMeta& meta_;
  const CostModel& costs_;
  Transport transport_;
  int num_stages_, num_mb_;
  double transfer_time_;
  bool compute_only_ = false;
  int consumed_recvs_ = 0;  // how many inputs ready_time() found delivered by a RECV

  SimResult result_;
  double makespan_ = 0.0;  // latest completion of any SEND/RECV
  std::uint32_t posted_ = 0;
  std::vector<int> stage_rank_;     // stage -> rank
  std::vector<int> boundary_pair_;  // boundary s (stages s, s+1) -> pair id, -1 on one rank
  std::vector<RankState> ranks_;
  std::vector<int> worklist_, stream_work_;
  std::vector<std::vector<Diagnostic>> rank_problems_;  // validation, per rank
  std::vector<KeyState> keys_;
  std::vector<std::uint8_t> seen_;                    // per key: kSeen* bits
  std::vector<std::array<std::int32_t, 2>> send_at_;  // eager only: SEND index per key
  std::vector<Pair> pairs_;
  std::vector<End> ends_;
  std::vector<Stream> streams_;
  std::vector<Pending> pending_;
  std::size_t pending_kept_ = 0;  // size after the last sweep of completed entries
  std::vector<std::unique_ptr<Hop[]>> hop_blocks_;
};

}  // namespace pipeplan::detail
