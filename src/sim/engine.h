// Internal: the simulation engine shared by simulate.cc (ranks, computes)
// and transport.cc (posting and matching SEND/RECV, stuck reports).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/simulate.h"

namespace pipeplan::detail {

class Engine {
 public:
  Engine(const Plan& plan, const SimOptions& options);
  SimResult run();

 private:
  static constexpr double kUnknown = -1.0;  // every real time is >= 0
  static constexpr std::size_t kMaxProblems = 20;

  struct Loc {
    int rank = -1, index = -1;
  };
  struct RankState {
    std::size_t next = 0;  // index of the action to run next
    double host = 0.0;     // when the host reaches `next` (it blocks only on receives)
    double cursor = 0.0;   // when the compute stream is free
    double busy = 0.0, first_start = 0.0, last_end = 0.0;
    std::size_t computes = 0;
    int live = 0, peak = 0;
    bool queued = false;
  };
  // A posted SEND or RECV. `dir` 0 = forward value, 1 = gradient; `key` is
  // the receiving side's (stage, microbatch).
  struct Op {
    int rank, index, peer, dir;
    std::size_t key;
    bool send;
    int pair, pos;  // pair id and position among this rank's ops to the peer
    double post;   // when the host posted it
    double ready;  // when its data may start moving (a send waits for its producer)
    double done = kUnknown;
  };
  // Rank pair (lo < hi): ops each side posted toward the other, in order.
  struct Pair {
    int lo, hi;
    std::vector<int> from[2];  // [0]: posted by lo, [1]: posted by hi
    std::size_t head = 0;      // rendezvous: transfers settled so far
    double last_end = 0.0;
    bool broken = false;       // a non-complementary position was met
  };
  // Serial model: one in-order stream of every op a rank posted.
  struct Stream {
    std::vector<int> ops;
    std::size_t head = 0;
    double last_end = 0.0;
  };

  std::size_t key(int stage, int mb) const {
    return static_cast<std::size_t>(stage) * static_cast<std::size_t>(num_mb_) +
           static_cast<std::size_t>(mb);
  }
  bool in_range(int stage, int mb) const;

  // simulate.cc
  bool validate();
  bool validate_action(int rank, int index, const Action& a);
  bool claim(std::vector<Loc>& slot, int stage, int mb, int rank, int index, const Action& a,
             const char* what);
  void bad(int rank, int index, const Action& a, const std::string& message);
  void wake(int rank);
  void drain();
  void advance(int rank);
  // Inputs: the time a value is there, kUnknown when not yet; `from` notes a
  // compute-only cross-rank producer, `received` whether a RECV delivers it.
  double forward_input(int stage, int mb, int rank, Loc* from, bool* received);
  double grad_input(int stage, int mb, int rank, Loc* from, bool* received);
  bool ready_time(const Action& a, int rank, Loc implicit[2], double* data, double* received);
  void complete_compute(int rank, const Action& a, double end);
  void add_implicit_transfer(Loc producer, Loc consumer);

  // transport.cc
  void post(int rank, int index, const Action& a, double ready);
  int pair_of(int a, int b);
  bool complementary(const Op& x, const Op& y) const;
  void settle(int send_op, int recv_op, double start);
  void try_pair(int pair);
  void try_serial(int rank);
  void mismatch(Pair& p, const Op& x, const Op& y);
  void finish();
  void report_stuck_rank(int rank);
  std::string why_not_received(int dir, std::size_t key, int rank);
  std::string peer_state(int rank) const;
  std::string describe(const Op& op) const;
  std::string action_at(int rank, int index) const;

  const Plan& plan_;
  const PlanMeta& meta_;
  const CostModel& costs_;
  Transport transport_;
  int num_stages_, num_mb_;
  double transfer_time_;
  bool compute_only_ = false;

  SimResult result_;
  std::vector<RankState> ranks_;
  std::vector<int> worklist_, stream_work_;
  // Per (stage, mb): end times of its F, B-or-I, W; and where they sit.
  std::vector<double> f_end_, bi_end_, w_end_;
  std::vector<Loc> f_at_, bi_at_, w_at_;
  // Per direction and receiving (stage, mb): completion and op ids.
  std::vector<double> recv_done_[2];
  std::vector<int> send_op_[2], recv_op_[2];
  std::vector<Op> ops_;
  std::vector<Pair> pairs_;
  std::vector<std::vector<std::pair<int, int>>> pair_index_;  // rank -> (peer, pair id)
  std::vector<Stream> streams_;
};

}  // namespace pipeplan::detail
