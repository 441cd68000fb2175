// Posting SEND/RECV and timing what the execution core matches under the
// three transport models, and the end-of-run accounting: per-rank
// statistics, or why ranks are stuck.
//   rendezvous: the k-th op a rank posts toward a peer meets the k-th op the
//               peer posts back; a pair's transfers run one at a time, in order.
//   eager:      a receive completes once its matching send was posted
//               (+ transfer time); nothing is ordered.
//   serial:     pair matching as rendezvous, but all of a rank's ops, to any
//               peer, run one at a time in the order the rank posted them.
// A posted op is held only while it waits for its partner: in its pair end's
// queue in the core (rendezvous, serial) or, under eager, found through its
// key. Its post and completion times are the timeline's start and end.
#include <algorithm>

#include "ir/deps.h"
#include "pipeplan/error.h"
#include "sim/engine.h"

namespace pipeplan::detail {

namespace {

int dir_of(ActionType t) { return (t == ActionType::SendF || t == ActionType::RecvF) ? 0 : 1; }

// The stage on the other side of a SEND/RECV's boundary.
int peer_stage_of(const Action& a) { return deps::peer_stage(a); }

}  // namespace

std::string Engine::action_at(int rank, int index) const {
  return to_string(plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)]);
}

std::string Engine::describe(int rank, int index) const {
  return action_at(rank, index) + " (rank " + std::to_string(rank) + " index " +
         std::to_string(index) + ")";
}

std::string Engine::peer_state(int rank) const {
  const auto& list = plan_.ranks[static_cast<std::size_t>(rank)];
  const std::size_t next = pc(rank);
  if (next >= list.size()) return "rank " + std::to_string(rank) + " finished its list";
  return "rank " + std::to_string(rank) + " is stuck at index " + std::to_string(next) + " (" +
         to_string(list[next]) + ")";
}

// A send ships a value this rank produced earlier in its list: it waits
// (stuck, reported by finish()) while that has not run.
run::Step Engine::transfer(int r, std::size_t index, const Action& a) {
  RankState& st = rank_[static_cast<std::size_t>(r)];
  double ready = st.host;
  if (is_send(a.type)) {
    const KeyState& k = keys_[key(a.stage, a.microbatch)];
    const double produced = a.type == ActionType::SendF ? k.f_end : k.bi_end;
    if (produced == kUnknown) return run::Step::Wait;
    ready = std::max(ready, produced);
  }
  result_.times[static_cast<std::size_t>(r)].push_back({st.host, kUnknown});
  if (is_recv(a.type)) st.peak_buffers = std::max(st.peak_buffers, ++st.buffers);
  const int dir = dir_of(a.type);
  const bool send = is_send(a.type);
  const int peer_stage = peer_stage_of(a);
  const std::size_t k = key(send ? peer_stage : a.stage, a.microbatch);
  const std::uint64_t tag = (static_cast<std::uint64_t>(k) << 2) |
                            static_cast<std::uint64_t>(dir << 1) | (send ? 1u : 0u);
  const Posted op{ready, tag, static_cast<std::int32_t>(index), posted_++};
  post(r, end_of(std::min(a.stage, peer_stage), r), op, send);
  return run::Step::Next;
}

// Eager: a receive met its send (by order), which was ready once posted and
// its value produced: the transfer starts then.
void Engine::on_delivered(int send_end, const Posted& s, int recv_end, const Posted& r) {
  settle(end(send_end).rank, s.index, send_end, end(recv_end).rank, r.index, s.tag, s.ready);
}

// A group ends with its last member: the host goes on from there.
void Engine::group_ended(int rank, std::size_t first, std::size_t n) {
  RankState& st = rank_[static_cast<std::size_t>(rank)];
  for (std::size_t j = first; j < first + n; ++j)
    st.host = std::max(st.host, time_at(rank, static_cast<int>(j)).end);
}

// Eager: an op posted before its partner, kept only to be reported if the
// partner never comes.
void Engine::on_waiting(int end, const Posted& op) {
  pending_.push_back({op.seq, this->end(end).rank, op.index});
  if (pending_.size() >= 2 * std::max<std::size_t>(pending_kept_, 1024)) {
    pending_.erase(
        std::remove_if(pending_.begin(), pending_.end(),
                       [&](const Pending& p) { return time_at(p.rank, p.index).end != kUnknown; }),
        pending_.end());
    pending_kept_ = pending_.size();
  }
}

// `tag` is either side's: key * 4 + direction * 2 + send, so tag / 2 is the
// value's key * 2 + direction, which the transfer list resolves later.
void Engine::settle(int send_rank, int send_index, int send_end, int recv_rank, int recv_index,
                    std::uint64_t tag, double start) {
  const double end = start + hop_time(tag >> 2);
  ActionTime& recv = time_at(recv_rank, recv_index);
  const double done = std::max(recv.start, end);  // a receive completes no earlier than posted
  time_at(send_rank, send_index).end = end;
  recv.end = done;
  makespan_ = std::max(makespan_, done);
  add_hop(send_end, Hop{start, send_index, static_cast<std::uint32_t>(tag >> 1)});
  wake(recv_rank);
}

// FIFO models: ops at one position complete when one sends exactly the
// value the other receives; anything else blocks the pair for good.
bool Engine::meet(int x_end, const Posted& x, int y_end, const Posted& y) {
  if ((x.tag ^ y.tag) == 1u) return true;
  mismatch(x_end, x, y_end, y);
  return false;
}

// The transfer starts when both are ready and the stream is free.
double Engine::complete(int x_end, const Posted& x, int y_end, const Posted& y, double busy) {
  const double start = std::max({x.ready, y.ready, busy});
  const int x_rank = end(x_end).rank, y_rank = end(y_end).rank;
  if (x.tag & 1u) settle(x_rank, x.index, x_end, y_rank, y.index, x.tag, start);
  else settle(y_rank, y.index, y_end, x_rank, x.index, x.tag, start);
  return start + hop_time(x.tag >> 2);
}

// A met pair that cannot complete: on pair positions (without groups,
// rendezvous and serial) or by order (eager, groups).
void Engine::mismatch(int x_end, const Posted& x, int y_end, const Posted& y) {
  const run::Pair& p = pairs()[static_cast<std::size_t>(x_end / 2)];
  const auto& ex = end(x_end);
  const auto& ey = end(y_end);
  const bool x_send = x.tag & 1u, y_send = y.tag & 1u;
  const bool x_lo = ex.rank == p.lo;
  const auto& lo = x_lo ? ex : ey;
  const int lo_index = x_lo ? x.index : y.index, hi_index = x_lo ? y.index : x.index;
  const int hi_rank = x_lo ? ey.rank : ex.rank;
  std::string why, where = "pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi);
  if (x_send && y_send) why = "both ranks send, so neither transfer completes";
  else if (!x_send && !y_send) why = "both ranks receive, so neither transfer completes";
  else why = "a send meets a receive of another value (data would be corrupted)";
  if (!buffered_sends(transport_) && !groups())
    where += " position " + std::to_string(static_cast<std::size_t>(lo.posted) - lo.queue.size());
  else where += ", sends and receives met in order";
  result_.problems.push_back({"sim-mismatch", lo.rank, lo_index, action_at(lo.rank, lo_index),
                              where + ": " + describe(lo.rank, lo_index) + " meets " +
                                  describe(hi_rank, hi_index) + ": " + why});
}

int Engine::find_posted(int end, int index) const {
  const run::End<Posted>& e = ends_[static_cast<std::size_t>(end)];
  for (std::size_t j = 0; j < e.queue.size(); ++j)
    if (e.queue[j].index == index) return static_cast<int>(j);
  return -1;
}

std::string Engine::why_not_received(int dir, std::size_t k, int rank) {
  const int stage = static_cast<int>(k % static_cast<std::size_t>(num_stages_));
  const int mb = static_cast<int>(k / static_cast<std::size_t>(num_stages_));
  const Action recv = make(dir == 0 ? ActionType::RecvF : ActionType::RecvB, stage, mb);
  const int send_stage = dir == 0 ? stage - 1 : stage + 1;
  const Action send = make(dir == 0 ? ActionType::SendF : ActionType::SendB, send_stage, mb);
  const int peer = rank_of(send_stage);
  const int at = keys_[k].recv_at[dir];
  if (!passed(rank, at))
    return "its input arrives by " + to_string(recv) + ", which rank " + std::to_string(rank) +
           " has not posted before it";
  if (buffered_sends(transport_))
    return to_string(recv) + " waits for " + to_string(send) + " from rank " +
           std::to_string(peer) + ", never posted: " + peer_state(peer);
  if (groups()) {
    const auto& l = link(rank, at);
    if (!l.met()) return to_string(recv) + " meets no send posted yet: " + peer_state(peer);
    return to_string(recv) + " meets " + describe(l.peer_rank, l.peer_index) +
           ", but a unit holding them never reaches the head of its stream";
  }
  const int e = end_of(std::min(stage, send_stage), rank);
  const run::End<Posted>& mine = ends_[static_cast<std::size_t>(e)];
  const run::End<Posted>& theirs = ends_[static_cast<std::size_t>(e ^ 1)];
  const run::Pair& p = pairs_[static_cast<std::size_t>(e) / 2];
  // Not complete, so still queued; its position counts every op before it.
  const std::size_t pos = static_cast<std::size_t>(mine.posted) - mine.queue.size() +
                          static_cast<std::size_t>(find_posted(e, at));
  const std::string pos_s = "pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi) +
                            " position " + std::to_string(pos);
  if (p.broken)
    return to_string(recv) + " is on pair " + std::to_string(p.lo) + "-" + std::to_string(p.hi) +
           ", which is blocked at a mismatched position (see sim-mismatch)";
  if (pos >= static_cast<std::size_t>(theirs.posted))
    return to_string(recv) + " is " + pos_s + ", but rank " + std::to_string(peer) +
           " posted only " + std::to_string(theirs.posted) + " operation(s) toward rank " +
           std::to_string(rank) + ": " + peer_state(peer);
  // Serial only: the match exists but one of the streams is busy with an
  // earlier operation that cannot complete.
  const std::size_t their_matched = static_cast<std::size_t>(theirs.posted) - theirs.queue.size();
  const Posted& y = theirs.queue[pos - their_matched];
  const run::Stream& own = streams_[static_cast<std::size_t>(rank)];
  const run::Stream& other = streams_[static_cast<std::size_t>(theirs.rank)];
  auto head_index = [&](const run::Stream& s) {
    return ends_[static_cast<std::size_t>(s.ends.front())].queue.front().index;
  };
  if (!own.ends.empty() && head_index(own) != at)
    return to_string(recv) + " waits behind " + describe(rank, head_index(own)) + " on rank " +
           std::to_string(rank) + "'s serial stream";
  return to_string(recv) + " meets " + describe(theirs.rank, y.index) + ", which waits behind " +
         describe(theirs.rank, head_index(other)) + " on rank " + std::to_string(theirs.rank) +
         "'s serial stream";
}

void Engine::report_stuck_rank(int r) {
  const std::size_t next = pc(r);
  const Action& a = plan_.ranks[static_cast<std::size_t>(r)][next];
  const std::string rank_s = std::to_string(r);
  // Where a same-rank input that has not run sits, if anywhere.
  auto local = [&](std::int32_t KeyState::*at, ActionType t, int s, int mb) {
    const int index = keys_[key(s, mb)].*at;
    std::string name = to_string(make(t, s, mb));
    if (index < 0) return "needs " + name + ", which no rank runs";
    return "needs " + name + ", which rank " + rank_s + " runs later (index " +
           std::to_string(index) + ")";
  };
  auto cross = [&](int dir, int s, int mb) {
    if (!compute_only_) return why_not_received(dir, key(s, mb), r);
    const int src = dir == 0 ? s - 1 : s + 1;
    const int index = dir == 0 ? keys_[key(src, mb)].f_at : keys_[key(src, mb)].bi_at;
    const std::string name = dir == 0 ? to_string(make(ActionType::F, src, mb))
                                      : "the backward of stage " + std::to_string(src) +
                                            " microbatch " + std::to_string(mb);
    if (index < 0) return "needs " + name + ", which no rank runs";
    return "needs " + name + " from rank " + std::to_string(rank_of(src)) + ": " +
           peer_state(rank_of(src));
  };
  auto fwd = [&](int s, int mb) {
    if (rank_of(s - 1) == r) return local(&KeyState::f_at, ActionType::F, s - 1, mb);
    return cross(0, s, mb);
  };
  auto grad = [&](int s, int mb) -> std::string {
    if (keys_[key(s, mb)].f_end == kUnknown) return local(&KeyState::f_at, ActionType::F, s, mb);
    if (rank_of(s + 1) == r) {
      const int index = keys_[key(s + 1, mb)].bi_at;
      const bool split =
          index >= 0 &&
          plan_.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(index)].type ==
              ActionType::I;
      return local(&KeyState::bi_at, split ? ActionType::I : ActionType::B, s + 1, mb);
    }
    return cross(1, s, mb);
  };
  std::string why;
  if (groups() && link(r, static_cast<int>(next)).unit >= 0) {  // an open BATCH_P2P group
    std::size_t j = next;
    while (link(r, static_cast<int>(j)).done && a.batch_next) ++j;
    const Action& m = plan_.ranks[static_cast<std::size_t>(r)][j];
    why = "its BATCH_P2P group waits for " + describe(r, static_cast<int>(j)) + ": " +
          (is_recv(m.type) ? why_not_received(dir_of(m.type), key(m.stage, m.microbatch), r)
                           : std::string("it never meets its receive"));
    result_.problems.push_back(
        {"sim-deadlock", r, static_cast<int>(next), to_string(a), "stuck: " + why});
    return;
  }
  switch (a.type) {
    case ActionType::SendF:
      why = "ships " + to_string(make(ActionType::F, a.stage, a.microbatch)) +
            ", which has not run before it on rank " + rank_s;
      break;
    case ActionType::SendB:
      why = "ships the input gradient of stage " + std::to_string(a.stage) +
            ", whose backward has not run before it on rank " + rank_s;
      break;
    case ActionType::F: why = fwd(a.stage, a.microbatch); break;
    case ActionType::B:
    case ActionType::I: why = grad(a.stage, a.microbatch); break;
    case ActionType::W: why = local(&KeyState::bi_at, ActionType::I, a.stage, a.microbatch); break;
    case ActionType::OverlapFB: {
      Loc unused;
      bool via = false;
      why = forward_input(a.stage, a.microbatch, r, &unused, &via) == kUnknown
                ? fwd(a.stage, a.microbatch)
                : grad(a.sub_stage, a.sub_microbatch);
      break;
    }
    default: why = "cannot run"; break;
  }
  result_.problems.push_back(
      {"sim-deadlock", r, static_cast<int>(next), to_string(a), "stuck: " + why});
}

// Every posted op still waiting for its partner, in posting order.
std::vector<Engine::Unmatched> Engine::unmatched_ops() const {
  std::vector<Unmatched> out;
  if (groups() && !buffered_sends(transport_)) {
    for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
      for (std::size_t i = 0; i < plan_.ranks[r].size(); ++i) {
        const auto& l = link(static_cast<int>(r), static_cast<int>(i));
        if (l.unit >= 0 && !l.done)
          out.push_back({l.op.seq, static_cast<int>(r), static_cast<int>(i), l.end, -1});
      }
  } else if (buffered_sends(transport_)) {
    for (const Pending& p : pending_)
      if (result_.times[static_cast<std::size_t>(p.rank)][static_cast<std::size_t>(p.index)].end ==
          kUnknown)
        out.push_back({p.seq, p.rank, p.index, -1, -1});
  } else {
    for (std::size_t e = 0; e < ends_.size(); ++e) {
      const run::End<Posted>& end = ends_[e];
      const int matched = end.posted - static_cast<int>(end.queue.size());
      for (std::size_t j = 0; j < end.queue.size(); ++j)
        out.push_back({end.queue[j].seq, end.rank, end.queue[j].index, static_cast<int>(e),
                       matched + static_cast<int>(j)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Unmatched& a, const Unmatched& b) { return a.seq < b.seq; });
  return out;
}

void Engine::finish() {
  const int n_ranks = meta_.pp_degree;
  // Actions a stuck rank never reached keep zero times.
  for (std::size_t r = 0; r < result_.times.size(); ++r)
    result_.times[r].resize(plan_.ranks[r].size());
  for (int r = 0; r < n_ranks; ++r)
    if (pc(r) < plan_.ranks[static_cast<std::size_t>(r)].size() &&
        result_.problems.size() < kMaxProblems)
      report_stuck_rank(r);
  // Ranks that reached their end still wait for every op they posted.
  for (const Unmatched& op : unmatched_ops()) {
    if (result_.problems.size() >= kMaxProblems) break;
    if (pc(op.rank) < plan_.ranks[static_cast<std::size_t>(op.rank)].size()) continue;
    const Action& a =
        plan_.ranks[static_cast<std::size_t>(op.rank)][static_cast<std::size_t>(op.index)];
    std::string why;
    if (!is_send(a.type)) {
      why = why_not_received(dir_of(a.type), key(a.stage, a.microbatch), op.rank);
    } else if (buffered_sends(transport_)) {
      why = "no rank posts its receive";
    } else {
      const run::End<Posted>& theirs = ends_[static_cast<std::size_t>(op.end ^ 1)];
      why = theirs.posted <= op.pos
                ? "rank " + std::to_string(theirs.rank) + " posted only " +
                      std::to_string(theirs.posted) + " operation(s) toward rank " +
                      std::to_string(op.rank) + ": " + peer_state(theirs.rank)
                : "it is queued behind an operation that cannot complete";
    }
    result_.problems.push_back(
        {"sim-unmatched", op.rank, op.index, action_at(op.rank, op.index),
         describe(op.rank, op.index) + " never completes at the end of the step: " + why});
  }
  // A failed run still lists the transfers that happened.
  order_transfers();
  if (!result_.problems.empty()) return;

  if (!mem_.empty()) account_memory();
  double makespan = 0.0, busy = 0.0;
  for (const RankState& st : rank_) makespan = std::max({makespan, st.last_end, st.copy_cursor});
  makespan = std::max(makespan, makespan_);
  result_.makespan = makespan;
  for (int r = 0; r < n_ranks; ++r) {
    const RankState& st = rank_[static_cast<std::size_t>(r)];
    RankStats s;
    s.rank = r;
    s.busy = st.busy;
    s.idle = makespan - st.busy;
    s.first_start = st.first_start;
    s.last_end = st.last_end;
    s.peak_activations = st.peak;
    s.peak_rank_activations = static_cast<double>(st.peak) / meta_.stages_per_rank;
    s.peak_memory = st.peak_memory;
    s.peak_recv_buffers = st.peak_buffers;
    s.peak_host_memory = st.peak_host;
    s.copy_busy = st.copy_busy;
    busy += st.busy;
    result_.ranks.push_back(s);
  }
  result_.bubble_fraction = makespan > 0 ? 1.0 - busy / (n_ranks * makespan) : 0.0;
}

}  // namespace pipeplan::detail
