// Internal: the simulator, a timed policy of the execution core
// (src/run/core.h), shared by simulate.cc (checks, computes: the core's
// enter/compute hooks), transport.cc (posting SEND/RECV and timing what the
// core matches, stuck reports) and transfer_order.cc (the transfer list in
// time order).
//
// One pass over the plan: an action is checked, and claims its records, when
// its rank first reaches it. Memory besides the result is one 32-byte record
// per (stage, microbatch) and one 16-byte record per transfer; posted
// operations live only in the core's short queues until they match, and when
// an op was posted or completed is read back from the result's timeline.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/simulate.h"
#include "run/core.h"

namespace pipeplan::detail {

// A posted SEND or RECV waiting for its partner. `tag` is key*4 + dir*2 +
// send, so two ops are complementary when their tags differ in bit 0 only.
struct Posted {
  double ready;  // when its data may start moving (a send waits for its producer)
  std::uint64_t tag;
  std::int32_t index;
  std::uint32_t seq;  // global posting order, for reports
};

class Engine : public run::Core<Engine, Posted> {
 public:
  // Last woken runs first, rank 0 first: the order the reports' posting
  // sequence numbers (and so the order of sim-unmatched) come from.
  static constexpr run::Order kOrder = run::Order::Stack;

  Engine(const Plan& plan, const SimOptions& options);
  SimResult simulate();

 private:
  friend class run::Core<Engine, Posted>;

  static constexpr double kUnknown = -1.0;  // every real time is >= 0
  static constexpr std::size_t kMaxProblems = 20;
  static constexpr std::size_t kPrefetchPlan = 24, kPrefetchKey = 12;  // actions ahead
  static constexpr std::uint32_t kHopBlock = 4096;  // transfers per storage block

  struct Loc {
    int rank = -1, index = -1;
  };
  struct RankState {
    std::size_t checked = 0;  // actions checked and recorded (the core's pc, or one past it)
    double host = 0.0;        // when the host reaches the core's pc (it blocks only on receives)
    double cursor = 0.0;      // when the compute stream is free
    double busy = 0.0, first_start = 0.0, last_end = 0.0;
    std::size_t computes = 0;
    int live = 0, peak = 0;
    double memory = 0.0, peak_memory = 0.0;     // live activations weighted by stage size
    int buffers = 0, peak_buffers = 0;          // RECVs posted whose consumer has not run
    double copy_cursor = 0.0, copy_busy = 0.0;  // the copy stream: when free, time busy
    double peak_host = 0.0;                     // memory actions: host memory at its peak
  };
  // Per (stage, microbatch) of a plan with memory actions (mem_, else
  // empty): where its memory actions sit, whether the plan recomputes it
  // (its F keeps only its input) and when its RELOAD ended.
  struct MemKey {
    double reload_end = kUnknown;
    std::int32_t off_at = -1, rel_at = -1, rec_at = -1;
    bool recompute = false;
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
  // The transfers one pair end sent (blocks of hop_blocks_, in start order).
  struct HopEnd {
    std::vector<std::uint32_t> blocks;
    std::uint32_t fill = kHopBlock;  // hops in the last block
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
  void prefetch(const Action* list, std::size_t i, std::size_t n) const {
    if (i + kPrefetchPlan < n) __builtin_prefetch(&list[i + kPrefetchPlan]);
    if (i + kPrefetchKey < n) prefetch_key(list[i + kPrefetchKey]);
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
    if (in_range(stage, mb) && rank_of(stage) == rank && routes_.on_route(stage, mb)) return true;
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

  // memory.cc: memory actions (the copy hook, their checks, device and host
  // memory over time)
  run::Step copy(int rank, std::size_t index, const Action& a);
  void find_recomputes();
  bool validate_memory(int rank, int index, const Action& a);
  bool backward_reads_device(int rank, int index, const Action& a, int stage, int mb);
  double kept_at(std::size_t k) const {
    return mem_.empty() || mem_[k].off_at < 0 ? keys_[k].f_end : mem_[k].reload_end;
  }
  void account_memory();

  // simulate.cc: the core's enter, compute and bookkeeping hooks
  run::Step enter(int rank, std::size_t index, const Action& a);
  run::Step compute(int rank, std::size_t index, const Action& a);
  run::Step bookkeeping(int rank, std::size_t index, const Action& a);
  bool check_rest();
  bool check_groups();
  bool validate_action(int rank, int index, const Action& a);
  void misplaced(int rank, int index, const Action& a, int stage, int mb);
  void duplicate(int first, int stage, int mb, int rank, int index, const Action& a,
                 const char* what);
  bool claim_w(int rank, int index, const Action& a);
  void bad(int rank, int index, const Action& a, const std::string& message);
  // Inputs: the time a value is there, kUnknown when not yet; `from` notes a
  // compute-only cross-rank producer, `received` whether a RECV delivers it.
  double forward_input(int stage, int mb, int rank, Loc* from, bool* received);
  double grad_input(int stage, int mb, int rank, Loc* from, bool* received);
  double received(int dir, std::size_t k, int rank) const;
  bool ready_time(const Action& a, int rank, Loc implicit[2], double* data, double* received);
  void complete_compute(int rank, const Action& a, double end);
  void add_implicit_transfer(int boundary, Loc producer, int stage, int mb, bool fwd);

  // transport.cc: the core's transfer hook and its transport hooks
  run::Step transfer(int rank, std::size_t index, const Action& a);
  bool meet(int x_end, const Posted& x, int y_end, const Posted& y);
  double complete(int x_end, const Posted& x, int y_end, const Posted& y, double busy);
  void on_delivered(int send_end, const Posted& s, int recv_end, const Posted& r);
  void on_waiting(int end, const Posted& op);
  void group_ended(int rank, std::size_t first, std::size_t n);
  void settle(int send_rank, int send_index, int send_end, int recv_rank, int recv_index,
              std::uint64_t tag, double start);
  void mismatch(int x_end, const Posted& x, int y_end, const Posted& y);
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
  // How long the value of key `k` takes to cross (its microbatch's length).
  double hop_time(std::size_t k) const {
    return variable_lengths_ ? costs_.transfer_time(static_cast<int>(k / num_stages_))
                             : transfer_time_;
  }

  const Plan& plan_;
  const PlanMeta& meta_;
  const CostModel& costs_;
  Transport transport_;
  int num_stages_, num_mb_;
  deps::Ends routes_;      // where each microbatch enters and leaves (its route)
  double transfer_time_;   // of every value, without variable lengths
  bool variable_lengths_;  // transfers then take their microbatch's time
  bool compute_only_ = false;
  int consumed_recvs_ = 0;  // how many inputs ready_time() found delivered by a RECV

  SimResult result_;
  double makespan_ = 0.0;  // latest completion of any SEND/RECV
  std::uint32_t posted_ = 0;
  std::vector<int> stage_rank_;  // stage -> rank
  std::vector<RankState> rank_;
  std::vector<std::vector<Diagnostic>> rank_problems_;  // validation, per rank
  std::vector<KeyState> keys_;
  std::vector<MemKey> mem_;         // plans with memory actions only
  std::vector<std::uint8_t> seen_;  // per key: kSeen* bits
  std::vector<HopEnd> hop_ends_;    // per pair end
  std::vector<Pending> pending_;
  std::size_t pending_kept_ = 0;  // size after the last sweep of completed entries
  std::vector<std::unique_ptr<Hop[]>> hop_blocks_;
};

}  // namespace pipeplan::detail
