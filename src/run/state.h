// Internal: the execution core's state (run/core.h): rank pairs and their
// ends (the transport's FIFO channels), the streams of the serial model and
// of BATCH_P2P units, and State, what a run leaves behind for reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/transport.h"
#include "run/fifo.h"

namespace pipeplan::run {

/// A rank pair that a stage boundary joins; its ends are ends()[2 * id]
/// (the lower rank's) and ends()[2 * id + 1].
struct Pair {
  int lo = 0, hi = 0;
  double busy_until = 0.0;  ///< rendezvous: when the pair's stream is free
  bool broken = false;      ///< meet() refused a position: nothing more completes
};

/// One end of a pair: what its rank posted towards the other end, in order.
/// End e's sends and the receives of end e ^ 1 are one channel, matched in
/// order: the channel's state sits on the sending end.
template <class Op>
struct End {
  int rank = 0;
  int posted = 0, done = 0;       ///< ops ever posted / completed (FIFO models)
  int recvs = 0, recvs_done = 0;  ///< receives ever posted / completed (eager)
  std::int32_t last_done = -1;    ///< action index of the last completed op (eager: receive)
  Fifo<Op> queue;                 ///< FIFO models without groups: posted, not completed yet
  Fifo<Op> unmatched;             ///< eager, groups: this channel's posted ops not met yet
  bool unmatched_recvs = false;   ///< whether `unmatched` holds receives (else sends)
};

/// With groups (use_groups()): a posted SEND/RECV, its met partner and its
/// unit (a single op, or a BATCH_P2P group whose first member holds the
/// unit's fields).
template <class Op>
struct Link {
  Op op{};
  std::int32_t end = -1;                         ///< its pair end
  std::int32_t peer_rank = -1, peer_index = -1;  ///< its met partner, once both posted
  std::int32_t unit = -1;                        ///< the index of its unit's first member
  std::int32_t left = 0;                         ///< unit head: members not completed yet
  std::int32_t stream = -1;  ///< unit head: the stream it runs on (rendezvous, serial)
  double until = 0.0;        ///< unit head: when its last completed member ended
  bool done = false;         ///< completed
  bool met() const { return peer_rank >= 0; }
};

/// With groups: a stream of units (rendezvous: one per pair end for single
/// ops and one per rank for groups; serial: one per rank), in posting order.
struct UnitStream {
  int rank = 0;
  Fifo<std::int32_t> units;  ///< first member index of each unit not ended
  double busy_until = 0.0;   ///< when the last unit ended
};

/// Serial model: a rank's one in-order stream over all its pair ends.
struct Stream {
  Fifo<int> ends;           ///< the end of every op posted and not completed
  double busy_until = 0.0;  ///< when the stream is free
};

/// The op record of a policy that posts nothing.
struct NoOp {
  std::int32_t index = -1;
};

/// What a run leaves behind, readable without the policy's type (reports
/// are written against this): program counters and the transport's state.
template <class Op>
class State {
 public:
  /// The rank's program counter: forward runs have passed every action
  /// before it; backward runs have settled every action from it on.
  std::size_t pc(int rank) const { return ranks_[static_cast<std::size_t>(rank)].pc; }
  /// Forward runs: whether the rank passed (posted or ran) action `index`.
  bool passed(int rank, int index) const {
    return index >= 0 && static_cast<std::size_t>(index) < pc(rank);
  }
  bool halted(int rank) const { return ranks_[static_cast<std::size_t>(rank)].halted; }
  int num_ranks() const { return static_cast<int>(ranks_.size()); }

  Transport model() const { return model_; }
  const std::vector<Pair>& pairs() const { return pairs_; }
  const std::vector<End<Op>>& ends() const { return ends_; }
  const End<Op>& end(int e) const { return ends_[static_cast<std::size_t>(e)]; }
  const Stream& stream(int rank) const { return streams_[static_cast<std::size_t>(rank)]; }
  /// The end through which `rank` talks across boundary b (stages b, b+1);
  /// -1 when the boundary stays on one rank.
  int end_of(int boundary, int rank) const {
    const int pair = boundary_pair_[static_cast<std::size_t>(boundary)];
    if (pair < 0) return -1;
    return 2 * pair + (rank == pairs_[static_cast<std::size_t>(pair)].lo ? 0 : 1);
  }
  /// Whether the run keeps BATCH_P2P groups as units (use_groups()).
  bool groups() const { return groups_; }
  /// Whether a rank waits at each single SEND/RECV until it completed, as
  /// at a group of one (use_groups(), Waits::AtPost).
  bool waits_singles() const { return wait_singles_; }
  /// With groups: the posted op at (rank, index) (unposted: a default Link).
  const Link<Op>& link(int rank, int index) const {
    return links_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const std::vector<UnitStream>& unit_streams() const { return ustreams_; }
  /// With groups (rendezvous, serial): whether the unit whose first member is
  /// (rank, unit) is on its stream and at its head.
  bool at_head(int rank, int unit) const {
    const Link<Op>& u = link(rank, unit);
    if (u.stream < 0) return false;
    const auto& q = ustreams_[static_cast<std::size_t>(u.stream)].units;
    return !q.empty() && q.front() == unit;
  }

  /// Builds the pairs of `meta`'s stage layout (one per pair of ranks some
  /// boundary joins, in boundary order) for transfers under `model`.
  void connect(const PlanMeta& meta, Transport model) {
    model_ = model;
    const int stages = meta.num_stages(), n = meta.pp_degree;
    boundary_pair_.assign(static_cast<std::size_t>(stages > 1 ? stages - 1 : 0), -1);
    std::vector<std::vector<std::pair<int, int>>> by_lo(static_cast<std::size_t>(n));
    for (int b = 0; b + 1 < stages; ++b) {
      const int x = meta.rank_of(b), y = meta.rank_of(b + 1);
      if (x == y) continue;
      const int lo = x < y ? x : y, hi = x < y ? y : x;
      int id = -1;
      for (const auto& [peer, pid] : by_lo[static_cast<std::size_t>(lo)])
        if (peer == hi) id = pid;
      if (id < 0) {
        id = static_cast<int>(pairs_.size());
        pairs_.push_back(Pair{lo, hi});
        by_lo[static_cast<std::size_t>(lo)].push_back({hi, id});
      }
      boundary_pair_[static_cast<std::size_t>(b)] = id;
    }
    ends_.resize(2 * pairs_.size());
    for (std::size_t p = 0; p < pairs_.size(); ++p) {
      ends_[2 * p].rank = pairs_[p].lo;
      ends_[2 * p + 1].rank = pairs_[p].hi;
    }
    streams_.assign(static_cast<std::size_t>(n), Stream{});
    links_.clear();
    ustreams_.clear();
    groups_ = false;
    wait_singles_ = false;
  }

  /// Runs the BATCH_P2P groups of `programs` as units (after connect()):
  /// one Link per action. Policies that post their transfers call it when
  /// the plan holds a group; without it a group's members run one by one.
  /// `wait_singles`: each single SEND/RECV is waited where it stands, a unit
  /// of one on its pair's stream (Waits::AtPost).
  void use_groups(const std::vector<std::vector<Action>>& programs, bool wait_singles = false) {
    links_.assign(programs.size(), {});
    groups_ = !links_.empty();
    wait_singles_ = groups_ && wait_singles;
    for (std::size_t r = 0; r < programs.size(); ++r) links_[r].resize(programs[r].size());
    if (buffered_sends(model_)) return;
    // rendezvous: stream e is pair end e's, stream 2P + r rank r's groups';
    // serial: stream 2P + r is rank r's one stream
    ustreams_.assign(ends_.size() + programs.size(), UnitStream{});
    for (std::size_t e = 0; e < ends_.size(); ++e) ustreams_[e].rank = ends_[e].rank;
    for (std::size_t r = 0; r < programs.size(); ++r)
      ustreams_[ends_.size() + r].rank = static_cast<int>(r);
  }

 protected:
  struct Rank {
    std::size_t pc = 0;
    std::uint32_t group_posted = 0;  // with groups: members of the group at pc posted so far
    bool queued = false, halted = false;
    bool group_open = false;  // with groups: the group at pc is posted, not ended
  };

  std::vector<Rank> ranks_;
  Transport model_ = Transport::Rendezvous;
  std::vector<int> boundary_pair_;  // boundary b (stages b, b+1) -> pair id, -1 on one rank
  std::vector<Pair> pairs_;
  std::vector<End<Op>> ends_;
  std::vector<Stream> streams_;
  std::vector<std::vector<Link<Op>>> links_;  // with groups: per rank, per action
  std::vector<UnitStream> ustreams_;          // with groups, rendezvous / serial
  bool groups_ = false;                       // use_groups() was called
  bool wait_singles_ = false;                 // use_groups(.., true): singles waited
};

}  // namespace pipeplan::run
