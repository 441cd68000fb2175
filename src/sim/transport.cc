// Posting and matching SEND/RECV under the three transport models, and the
// end-of-run accounting: per-rank statistics, or why ranks are stuck.
//   rendezvous: the k-th op a rank posts toward a peer meets the k-th op the
//               peer posts back; a pair's transfers run one at a time, in order.
//   eager:      a receive completes once its matching send was posted
//               (+ transfer time); nothing is ordered.
//   serial:     pair matching as rendezvous, but all of a rank's ops, to any
//               peer, run one at a time in the order the rank posted them.
#include <algorithm>

#include "pipeplan/error.h"
#include "sim/engine.h"

namespace pipeplan::detail {

std::string Engine::action_at(int rank, int index) const {
  return to_string(plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)]);
}

std::string Engine::describe(const Op& op) const {
  return action_at(op.rank, op.index) + " (rank " + std::to_string(op.rank) + " index " +
         std::to_string(op.index) + ")";
}

std::string Engine::peer_state(int rank) const {
  const RankState& st = ranks_[static_cast<std::size_t>(rank)];
  const auto& list = plan_.ranks[static_cast<std::size_t>(rank)];
  if (st.next >= list.size()) return "rank " + std::to_string(rank) + " finished its list";
  return "rank " + std::to_string(rank) + " is stuck at index " + std::to_string(st.next) + " (" +
         to_string(list[st.next]) + ")";
}

int Engine::pair_of(int a, int b) {
  if (pair_index_.empty()) pair_index_.resize(static_cast<std::size_t>(meta_.pp_degree));
  const int lo = std::min(a, b), hi = std::max(a, b);
  for (const auto& [peer, id] : pair_index_[static_cast<std::size_t>(lo)])
    if (peer == hi) return id;
  // A rank talks to few peers, so a short list per rank is enough.
  const int id = static_cast<int>(pairs_.size());
  pairs_.push_back(Pair{lo, hi, {}, 0, 0.0, false});
  pair_index_[static_cast<std::size_t>(lo)].push_back({hi, id});
  return id;
}

void Engine::post(int rank, int index, const Action& a, double ready) {
  const int dir = (a.type == ActionType::SendF || a.type == ActionType::RecvF) ? 0 : 1;
  const bool send = is_send(a.type);
  const int peer_stage =
      (a.type == ActionType::SendF || a.type == ActionType::RecvB) ? a.stage + 1 : a.stage - 1;
  const int recv_stage = send ? peer_stage : a.stage;
  Op op{rank, index, meta_.rank_of(peer_stage), dir, key(recv_stage, a.microbatch), send, -1, -1,
        ranks_[static_cast<std::size_t>(rank)].host, ready};
  const int id = static_cast<int>(ops_.size());
  (send ? send_op_ : recv_op_)[dir][op.key] = id;
  if (transport_ == Transport::Eager) {
    ops_.push_back(op);
    const int other = (send ? recv_op_ : send_op_)[dir][op.key];
    if (other >= 0) {
      const int s = send ? id : other;
      settle(s, send ? other : id, ops_[static_cast<std::size_t>(s)].ready);
    }
    return;
  }
  op.pair = pair_of(rank, op.peer);
  Pair& p = pairs_[static_cast<std::size_t>(op.pair)];
  auto& mine = p.from[rank == p.lo ? 0 : 1];
  op.pos = static_cast<int>(mine.size());
  mine.push_back(id);
  ops_.push_back(op);
  if (transport_ == Transport::Rendezvous) {
    try_pair(op.pair);
  } else {
    streams_[static_cast<std::size_t>(rank)].ops.push_back(id);
    try_serial(rank);
  }
}

bool Engine::complementary(const Op& x, const Op& y) const {
  return x.send != y.send && x.dir == y.dir && x.key == y.key;
}

void Engine::settle(int send_id, int recv_id, double start) {
  Op& s = ops_[static_cast<std::size_t>(send_id)];
  Op& r = ops_[static_cast<std::size_t>(recv_id)];
  const double end = start + transfer_time_;
  s.done = end;
  r.done = std::max(r.post, end);
  result_.times[static_cast<std::size_t>(s.rank)][static_cast<std::size_t>(s.index)].end = s.done;
  result_.times[static_cast<std::size_t>(r.rank)][static_cast<std::size_t>(r.index)].end = r.done;
  recv_done_[r.dir][r.key] = r.done;
  // The value's producer sits next to the sender's stage, its consumer is
  // the receiver's compute of the same (stage, microbatch).
  const std::size_t producer_key =
      r.dir == 0 ? r.key - static_cast<std::size_t>(num_mb_) : r.key + static_cast<std::size_t>(num_mb_);
  Transfer x;
  x.src_rank = s.rank;
  x.src_index = s.index;
  x.dst_rank = r.rank;
  x.dst_index = r.index;
  x.producer = (r.dir == 0 ? f_at_ : bi_at_)[producer_key].index;
  x.consumer = (r.dir == 0 ? f_at_ : bi_at_)[r.key].index;
  x.start = start;
  x.end = end;
  result_.transfers.push_back(x);
  wake(r.rank);
}

void Engine::mismatch(Pair& p, const Op& x, const Op& y) {
  p.broken = true;
  const Op& lo = x.rank == p.lo ? x : y;
  const Op& hi = x.rank == p.lo ? y : x;
  std::string why;
  if (x.send && y.send) why = "both ranks send, so neither transfer completes";
  else if (!x.send && !y.send) why = "both ranks receive, so neither transfer completes";
  else why = "a send meets a receive of another value (data would be corrupted)";
  result_.problems.push_back(
      {"sim-mismatch", lo.rank, lo.index, action_at(lo.rank, lo.index),
       "pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi) + " position " +
           std::to_string(lo.pos) + ": " + describe(lo) + " meets " + describe(hi) + ": " + why});
}

void Engine::try_pair(int pair) {
  Pair& p = pairs_[static_cast<std::size_t>(pair)];
  while (!p.broken && p.head < p.from[0].size() && p.head < p.from[1].size()) {
    const int xi = p.from[0][p.head], yi = p.from[1][p.head];
    const Op& x = ops_[static_cast<std::size_t>(xi)];
    const Op& y = ops_[static_cast<std::size_t>(yi)];
    if (!complementary(x, y)) return mismatch(p, x, y);
    const double start = std::max({x.ready, y.ready, p.last_end});
    settle(x.send ? xi : yi, x.send ? yi : xi, start);
    p.last_end = start + transfer_time_;
    ++p.head;
  }
}

void Engine::try_serial(int rank) {
  Stream& mine = streams_[static_cast<std::size_t>(rank)];
  while (mine.head < mine.ops.size()) {
    const int xi = mine.ops[mine.head];
    const Op& x = ops_[static_cast<std::size_t>(xi)];
    Pair& p = pairs_[static_cast<std::size_t>(x.pair)];
    const auto& theirs = p.from[x.rank == p.lo ? 1 : 0];
    if (p.broken || static_cast<std::size_t>(x.pos) >= theirs.size()) return;
    const int yi = theirs[static_cast<std::size_t>(x.pos)];
    const Op& y = ops_[static_cast<std::size_t>(yi)];
    Stream& other = streams_[static_cast<std::size_t>(y.rank)];
    if (other.head >= other.ops.size() || other.ops[other.head] != yi) return;
    if (!complementary(x, y)) return mismatch(p, x, y);
    const double start = std::max({x.ready, y.ready, mine.last_end, other.last_end});
    settle(x.send ? xi : yi, x.send ? yi : xi, start);
    mine.last_end = other.last_end = start + transfer_time_;
    ++mine.head;
    ++other.head;
    stream_work_.push_back(y.rank);  // its next op may now meet its partner
  }
}

std::string Engine::why_not_received(int dir, std::size_t k, int rank) {
  const int stage = static_cast<int>(k / static_cast<std::size_t>(num_mb_));
  const int mb = static_cast<int>(k % static_cast<std::size_t>(num_mb_));
  const Action recv = make(dir == 0 ? ActionType::RecvF : ActionType::RecvB, stage, mb);
  const int send_stage = dir == 0 ? stage - 1 : stage + 1;
  const Action send = make(dir == 0 ? ActionType::SendF : ActionType::SendB, send_stage, mb);
  const int peer = meta_.rank_of(send_stage);
  const int id = recv_op_[dir][k];
  if (id < 0)
    return "its input arrives by " + to_string(recv) + ", which rank " + std::to_string(rank) +
           " has not posted before it";
  const Op& r = ops_[static_cast<std::size_t>(id)];
  if (transport_ == Transport::Eager)
    return to_string(recv) + " waits for " + to_string(send) + " from rank " +
           std::to_string(peer) + ", never posted: " + peer_state(peer);
  const Pair& p = pairs_[static_cast<std::size_t>(r.pair)];
  const auto& theirs = p.from[rank == p.lo ? 1 : 0];
  const std::string pos = "pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi) +
                          " position " + std::to_string(r.pos);
  if (p.broken)
    return to_string(recv) + " is on pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi) +
           ", which is blocked at a mismatched position (see sim-mismatch)";
  if (static_cast<std::size_t>(r.pos) >= theirs.size())
    return to_string(recv) + " is " + pos + ", but rank " + std::to_string(peer) +
           " posted only " + std::to_string(theirs.size()) + " operation(s) toward rank " +
           std::to_string(rank) + ": " + peer_state(peer);
  // Serial only: the match exists but one of the streams is busy with an
  // earlier operation that cannot complete.
  const Op& y = ops_[static_cast<std::size_t>(theirs[static_cast<std::size_t>(r.pos)])];
  const Stream& own = streams_[static_cast<std::size_t>(rank)];
  const Stream& other = streams_[static_cast<std::size_t>(y.rank)];
  if (own.head < own.ops.size() && own.ops[own.head] != id)
    return to_string(recv) + " waits behind " +
           describe(ops_[static_cast<std::size_t>(own.ops[own.head])]) +
           " on rank " + std::to_string(rank) + "'s serial stream";
  return to_string(recv) + " meets " + describe(y) + ", which waits behind " +
         describe(ops_[static_cast<std::size_t>(other.ops[other.head])]) + " on rank " +
         std::to_string(y.rank) + "'s serial stream";
}

void Engine::report_stuck_rank(int r) {
  const RankState& st = ranks_[static_cast<std::size_t>(r)];
  const Action& a = plan_.ranks[static_cast<std::size_t>(r)][st.next];
  const std::string rank_s = std::to_string(r);
  // Where a same-rank input that has not run sits, if anywhere.
  auto local = [&](const std::vector<Loc>& at, ActionType t, int s, int mb) {
    const Loc loc = at[key(s, mb)];
    std::string name = to_string(make(t, s, mb));
    if (loc.rank < 0) return "needs " + name + ", which no rank runs";
    return "needs " + name + ", which rank " + rank_s + " runs later (index " +
           std::to_string(loc.index) + ")";
  };
  auto cross = [&](int dir, int s, int mb) {
    if (!compute_only_) return why_not_received(dir, key(s, mb), r);
    const int src = dir == 0 ? s - 1 : s + 1;
    const Loc loc = (dir == 0 ? f_at_ : bi_at_)[key(src, mb)];
    const std::string name = dir == 0 ? to_string(make(ActionType::F, src, mb))
                                      : "the backward of stage " + std::to_string(src) +
                                            " microbatch " + std::to_string(mb);
    if (loc.rank < 0) return "needs " + name + ", which no rank runs";
    return "needs " + name + " from rank " + std::to_string(loc.rank) + ": " +
           peer_state(loc.rank);
  };
  auto fwd = [&](int s, int mb) {
    if (meta_.rank_of(s - 1) == r) return local(f_at_, ActionType::F, s - 1, mb);
    return cross(0, s, mb);
  };
  auto grad = [&](int s, int mb) -> std::string {
    if (f_end_[key(s, mb)] == kUnknown) return local(f_at_, ActionType::F, s, mb);
    if (meta_.rank_of(s + 1) == r) {
      const Loc loc = bi_at_[key(s + 1, mb)];
      const bool split = loc.rank >= 0 &&
                         plan_.ranks[static_cast<std::size_t>(loc.rank)]
                                    [static_cast<std::size_t>(loc.index)].type == ActionType::I;
      return local(bi_at_, split ? ActionType::I : ActionType::B, s + 1, mb);
    }
    return cross(1, s, mb);
  };
  std::string why;
  switch (a.type) {
    case ActionType::SendF: why = "ships " + to_string(make(ActionType::F, a.stage, a.microbatch)) +
                                  ", which has not run before it on rank " + rank_s; break;
    case ActionType::SendB: why = "ships the input gradient of stage " + std::to_string(a.stage) +
                                  ", whose backward has not run before it on rank " + rank_s; break;
    case ActionType::F: why = fwd(a.stage, a.microbatch); break;
    case ActionType::B:
    case ActionType::I: why = grad(a.stage, a.microbatch); break;
    case ActionType::W: why = local(bi_at_, ActionType::I, a.stage, a.microbatch); break;
    case ActionType::OverlapFB:
    {
      Loc unused;
      bool via = false;
      why = forward_input(a.stage, a.microbatch, r, &unused, &via) == kUnknown
                ? fwd(a.stage, a.microbatch)
                : grad(a.sub_stage, a.sub_microbatch);
      break;
    }
    default: why = "cannot run"; break;
  }
  result_.problems.push_back({"sim-deadlock", r, static_cast<int>(st.next), to_string(a),
                              "stuck: " + why});
}

void Engine::finish() {
  const int n_ranks = meta_.pp_degree;
  for (int r = 0; r < n_ranks; ++r)
    if (ranks_[static_cast<std::size_t>(r)].next < plan_.ranks[static_cast<std::size_t>(r)].size() &&
        result_.problems.size() < kMaxProblems)
      report_stuck_rank(r);
  // Ranks that reached their end still wait for every op they posted.
  for (const Op& op : ops_) {
    if (op.done != kUnknown || result_.problems.size() >= kMaxProblems) continue;
    const RankState& st = ranks_[static_cast<std::size_t>(op.rank)];
    if (st.next < plan_.ranks[static_cast<std::size_t>(op.rank)].size()) continue;
    std::string why;
    if (!op.send) {
      why = why_not_received(op.dir, op.key, op.rank);
    } else if (transport_ == Transport::Eager) {
      why = "no rank posts its receive";
    } else {
      const Pair& p = pairs_[static_cast<std::size_t>(op.pair)];
      const std::size_t theirs = p.from[op.rank == p.lo ? 1 : 0].size();
      why = theirs <= static_cast<std::size_t>(op.pos)
                ? "rank " + std::to_string(op.peer) + " posted only " + std::to_string(theirs) +
                      " operation(s) toward rank " + std::to_string(op.rank) + ": " +
                      peer_state(op.peer)
                : "it is queued behind an operation that cannot complete";
    }
    result_.problems.push_back({"sim-unmatched", op.rank, op.index, action_at(op.rank, op.index),
                                describe(op) + " never completes at the end of the step: " + why});
  }
  if (!result_.problems.empty()) return;

  double makespan = 0.0, busy = 0.0;
  for (const RankState& st : ranks_) makespan = std::max(makespan, st.last_end);
  for (const Op& op : ops_) makespan = std::max(makespan, op.done);
  result_.makespan = makespan;
  for (int r = 0; r < n_ranks; ++r) {
    const RankState& st = ranks_[static_cast<std::size_t>(r)];
    RankStats s;
    s.rank = r;
    s.busy = st.busy;
    s.idle = makespan - st.busy;
    s.first_start = st.first_start;
    s.last_end = st.last_end;
    s.peak_activations = st.peak;
    s.peak_rank_activations = static_cast<double>(st.peak) / meta_.stages_per_rank;
    busy += st.busy;
    result_.ranks.push_back(s);
  }
  result_.bubble_fraction = makespan > 0 ? 1.0 - busy / (n_ranks * makespan) : 0.0;
  std::sort(result_.transfers.begin(), result_.transfers.end(),
            [](const Transfer& a, const Transfer& b) {
              if (a.start != b.start) return a.start < b.start;
              if (a.src_rank != b.src_rank) return a.src_rank < b.src_rank;
              return a.src_index < b.src_index;
            });
}

}  // namespace pipeplan::detail
