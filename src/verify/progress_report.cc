// The progress proof's failure reports (verify/proof.h): the static pair-FIFO
// check, payload corruption, and for every stuck rank what it waits for and
// the waiting chain, all rebuilt from the run's end counters.
#include <algorithm>
#include <string>

#include "ir/deps.h"
#include "verify/payload.h"
#include "verify/proof.h"

namespace pipeplan::detail {

namespace {

std::string head(int a, int b, int k) {
  return "pair " + n2s(a) + "-" + n2s(b) + " position " + n2s(k) + ": ";
}

}  // namespace

// Every end's operations (action indices, program order), each with its
// place among its end's sends or receives: the k-th send of an end meets the
// k-th receive of the reverse end.
void Proof::fill_ends() {
  idx_.assign(end_last_.empty() ? 0 : end_last_.back(), -1);
  seq_.assign(idx_.size(), -1);
  std::vector<std::size_t> next = end_first_;
  std::vector<std::array<std::int32_t, 2>> kinds(end_first_.size(), {0, 0});
  for (int r = 0; r < n_; ++r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!is_comm(list[i].type)) continue;
      const auto e = static_cast<std::size_t>(comm_end(list[i]));
      seq_[next[e]] = kinds[e][is_send(list[i].type) ? 1 : 0]++;
      idx_[next[e]++] = static_cast<std::int32_t>(i);
    }
  }
}

std::vector<int> Proof::pairs_in_rank_order() const {
  std::vector<int> ids(core_.pairs().size());
  for (std::size_t p = 0; p < ids.size(); ++p) ids[p] = static_cast<int>(p);
  std::sort(ids.begin(), ids.end(), [&](int x, int y) {
    const run::Pair& a = core_.pairs()[static_cast<std::size_t>(x)];
    const run::Pair& b = core_.pairs()[static_cast<std::size_t>(y)];
    return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi;
  });
  return ids;
}

// ---- static FIFO check ------------------------------------------------

// First non-complementary position of each pair, pairs in rank order
// (without groups, rendezvous and serial meet a pair's positions in order).
void Proof::fifo_check(std::vector<Diagnostic>& out) const {
  for (int id : pairs_in_rank_order()) {
    const int ea = 2 * id, eb = 2 * id + 1;
    const int a = core_.end(ea).rank, b = core_.end(eb).rank;
    const int n = std::min(count(ea), count(eb));
    for (int k = 0; k < n; ++k) {
      const OpRef xr = op_at(ea, k), yr = op_at(eb, k);
      const bool xs = is_send(action(xr).type);
      if (xs != is_send(action(yr).type)) continue;
      out.push_back({xs ? "fifo-both-send" : "fifo-both-recv", a, xr.index, act(xr),
                     head(a, b, k) + "rank " + n2s(a) + " posts " + act(xr) + " while rank " +
                         n2s(b) + " posts " + act(yr) +
                         (xs ? " (both send; NCCL pair stream hangs)"
                             : " (both receive; NCCL pair stream hangs)")});
      break;
    }
  }
}

namespace {

std::string value_text(const Action& a) {
  const deps::Value v = deps::carried(a);
  return std::string(v.kind == deps::Kind::Forward ? "Forward(" : "Grad(") + n2s(v.stage) + ", " +
         n2s(v.microbatch) + ")";
}

}  // namespace

// Under rendezvous a group member may meet a single SEND/RECV; on NCCL
// (torch's ProcessGroupNCCL, pipeplan's executor) grouped operations run on
// the group's communicator and single ones on the rank pair's, so the two
// never meet. Named per met pair, from the grouped end, until the runtimes
// are re-derived (docs/semantics.md).
void Proof::group_single_check(std::vector<Diagnostic>& out) const {
  constexpr std::size_t kMaxNamed = 10;
  std::size_t named = 0;
  const auto grouped = [this](int r, int i) {
    const std::vector<Action>& list = plan_.ranks[static_cast<std::size_t>(r)];
    return list[static_cast<std::size_t>(i)].batch_next ||
           list[static_cast<std::size_t>(i)].waited ||
           (i > 0 && list[static_cast<std::size_t>(i) - 1].batch_next);
  };
  for (int r = 0; r < n_ && named < kMaxNamed; ++r) {
    const std::vector<Action>& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()) && named < kMaxNamed; ++i) {
      if (!is_comm(list[static_cast<std::size_t>(i)].type) || !grouped(r, i)) continue;
      const auto& l = core_.link(r, i);
      if (!l.met() || grouped(l.peer_rank, l.peer_index)) continue;
      const OpRef x{r, i}, y{l.peer_rank, l.peer_index};
      out.push_back({"group-meets-single", r, i, act(x),
                     "rank " + n2s(r) + " posts " + act(x) + " in a BATCH_P2P group and rank " +
                         n2s(y.rank) + " posts its partner " + act(y) +
                         " alone: the rendezvous model lets them meet, but on NCCL (torch's "
                         "ProcessGroupNCCL, pipeplan's executor) grouped operations run on the "
                         "group's communicator and single ones on the pair's, so they never "
                         "meet; post both in groups or both alone"});
      ++named;
    }
  }
}

// Under every model the k-th send from rank a to rank b meets the k-th
// receive b posts from a: the first met pair of each direction whose values
// differ, pairs in rank order, the lower rank's sends first.
void Proof::report_corruption(std::vector<Diagnostic>& out) const {
  for (int id : pairs_in_rank_order()) {
    const int lo_end = core_.end(2 * id).rank < core_.end(2 * id + 1).rank ? 2 * id : 2 * id + 1;
    for (int se : {lo_end, lo_end ^ 1}) {
      const int re = se ^ 1;
      std::vector<OpRef> sends, recvs;
      for (int k = 0; k < count(se); ++k)
        if (is_send(action(op_at(se, k)).type)) sends.push_back(op_at(se, k));
      for (int k = 0; k < count(re); ++k)
        if (is_recv(action(op_at(re, k)).type)) recvs.push_back(op_at(re, k));
      const std::size_t n = std::min(sends.size(), recvs.size());
      for (std::size_t k = 0; k < n; ++k) {
        const OpRef sr = sends[k], rr = recvs[k];
        if (payload_of(action(sr)) == payload_of(action(rr))) continue;
        out.push_back({"fifo-corruption", rr.rank, rr.index, act(rr),
                       "send " + n2s(static_cast<long long>(k)) + " from rank " + n2s(sr.rank) +
                           " to rank " + n2s(rr.rank) + ": rank " + n2s(sr.rank) + " sends " +
                           act(sr) + " (" + value_text(action(sr)) + ") and rank " + n2s(rr.rank) +
                           " receives it as " + act(rr) + " (expects " + value_text(action(rr)) +
                           "); sends and receives meet in order, so the data would be silently "
                           "corrupted"});
        break;
      }
    }
  }
}

// ---- where each op stands after the run ----------------------------------

int Proof::pair_pos(OpRef o) const {
  const int e = comm_end(action(o));
  auto first = idx_.begin() + static_cast<std::ptrdiff_t>(end_first_[static_cast<std::size_t>(e)]);
  auto last = idx_.begin() + static_cast<std::ptrdiff_t>(end_last_[static_cast<std::size_t>(e)]);
  return static_cast<int>(std::lower_bound(first, last, o.index) - first);
}

// A group's members are posted while its rank waits at the group's first.
bool Proof::posted(OpRef o) const {
  if (core_.groups()) return core_.link(o.rank, o.index).unit >= 0;
  return o.index < static_cast<int>(core_.pc(o.rank));
}

int Proof::seq_of(OpRef o) const {
  return seq_[end_first_[static_cast<std::size_t>(comm_end(action(o)))] +
              static_cast<std::size_t>(pair_pos(o))];
}

// o's match by order: the k-th send of an end meets the k-th receive of the
// reverse end (invalid when the reverse end posts fewer).
Proof::OpRef Proof::match_of(OpRef o) const {
  const int rev = comm_end(action(o)) ^ 1;
  const bool want_send = !is_send(action(o).type);
  const int k = seq_of(o);
  for (int pos = 0; pos < count(rev); ++pos) {
    const std::size_t at =
        end_first_[static_cast<std::size_t>(rev)] + static_cast<std::size_t>(pos);
    if (seq_[at] == k && is_send(action(op_at(rev, pos)).type) == want_send) return op_at(rev, pos);
  }
  return {};
}

bool Proof::done(OpRef o) const {
  if (!posted(o)) return false;
  const Action& a = action(o);
  if (buffered_sends(core_.model())) {
    if (is_send(a.type)) return true;
    return seq_of(o) < core_.end(comm_end(a)).recvs_done;  // an end's receives complete in order
  }
  if (core_.groups()) return core_.link(o.rank, o.index).done;
  return pair_pos(o) < core_.end(comm_end(a)).done;
}

// The op sitting at position pair_pos(o) of the reverse end, if any.
Proof::OpRef Proof::partner(OpRef o) const {
  const int rev = comm_end(action(o)) ^ 1;
  const int k = pair_pos(o);
  if (k >= count(rev)) return {};
  return op_at(rev, k);
}

// Next SEND/RECV of rank r at or after index i.
int Proof::next_comm(int r, int i) const {
  const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
  while (i < static_cast<int>(list.size()) && !is_comm(list[static_cast<std::size_t>(i)].type)) ++i;
  return i;
}

// Head of the in-order stream o sits in (o itself when that stream is done).
// Serial: a rank's stream holds its posted, unfinished ops in order; when
// it is empty, the head is the rank's next SEND/RECV, not posted yet.
Proof::OpRef Proof::head_of(OpRef o) const {
  if (one_stream_per_rank(core_.model())) {
    const run::Stream& s = core_.stream(o.rank);
    const int h = s.ends.empty() ? next_comm(o.rank, static_cast<int>(core_.pc(o.rank)))
                                 : core_.end(s.ends.front()).queue.front().index;
    return h < static_cast<int>(plan_.ranks[static_cast<std::size_t>(o.rank)].size())
               ? OpRef{o.rank, h}
               : o;
  }
  const int e = comm_end(action(o));
  const int d = core_.end(e).done;
  return d < count(e) ? op_at(e, d) : o;
}

int Proof::peer_of(OpRef o) const { return core_.end(comm_end(action(o)) ^ 1).rank; }

std::string Proof::pair_name(OpRef o) const {
  const int peer = peer_of(o);
  return n2s(std::min(o.rank, peer)) + "-" + n2s(std::max(o.rank, peer));
}

bool Proof::pending(int r) const {
  if (!buffered_sends(core_.model())) {
    for (int e : ends_of_[static_cast<std::size_t>(r)])
      if (core_.end(e).done < count(e)) return true;
    return false;
  }
  return first_pending(r).valid();
}

Proof::OpRef Proof::first_pending(int r) const {
  const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
  for (int i = 0; i < static_cast<int>(list.size()); ++i)
    if (is_comm(list[static_cast<std::size_t>(i)].type) && !done({r, i})) return {r, i};
  return {};
}

// ---- stuck ranks ---------------------------------------------------------

// Why op `id` has not completed; sets `waits_for` to the rank whose missing
// post is the cause (or -1 for a non-complementary position).
std::string Proof::why(OpRef id, int& waits_for) const {
  waits_for = -1;
  std::string prefix;
  // Serial streams can wait on each other in a ring: name each head once.
  std::vector<OpRef> seen{id};
  auto lead = [&] { return prefix.empty() ? prefix : prefix + "and "; };
  auto queue_behind = [&](OpRef blocker) {
    bool again = std::find(seen.begin(), seen.end(), blocker) != seen.end();
    prefix += std::string(seen.size() == 1 ? "it queues behind " : "which waits on ") +
              act(blocker) + " (pair " + pair_name(blocker) + " position " +
              n2s(pair_pos(blocker)) + " on rank " + n2s(blocker.rank) + "), ";
    seen.push_back(blocker);
    return !again;
  };
  if (buffered_sends(core_.model())) {
    const OpRef s = match_of(id);  // only receives wait under eager
    if (!s.valid()) return act(id) + " has no matching send";
    waits_for = s.rank;
    return "rank " + n2s(waits_for) + " has not posted " + act(s) + " yet";
  }
  if (core_.groups()) return why_units(id, waits_for);
  for (int step = 0; step < 2 * n_ + 2; ++step) {
    std::string where = "pair " + pair_name(id) + " position " + n2s(pair_pos(id));
    if (OpRef h = head_of(id); h != id) {
      if (!queue_behind(h)) break;
      id = h;
      continue;
    }
    const OpRef p = partner(id);
    if (!p.valid())
      return lead() + act(id) + " (" + where + ") has no partner: rank " + n2s(peer_of(id)) +
             " posts fewer operations towards rank " + n2s(id.rank);
    if (!posted(p)) {
      waits_for = p.rank;
      return lead() + "rank " + n2s(p.rank) + " has not posted its " + act(p) + " (" + where +
             ") yet";
    }
    const bool id_send = is_send(action(id).type);
    if (id_send == is_send(action(p).type))
      return lead() + where + " is non-complementary: rank " + n2s(id.rank) + " posts " + act(id) +
             " while rank " + n2s(p.rank) + " posts " + act(p) +
             (id_send ? " (both send)" : " (both receive)");
    if (OpRef h = head_of(p); h != p) {
      if (!queue_behind(h)) break;
      id = h;
      continue;
    }
    return lead() + act(id) + " is ready but did not complete (internal)";
  }
  return prefix + "again: these stream heads wait on each other in a cycle";
}

// With groups (rendezvous, serial): why posted op `id` has not completed.
// A met pair completes once the units holding them are both at the head of
// their streams: follow whichever unit is not, to the head it waits behind.
std::string Proof::why_units(OpRef id, int& waits_for) const {
  waits_for = -1;
  std::string prefix;
  std::vector<OpRef> seen{id};
  auto lead = [&] { return prefix.empty() ? prefix : prefix + "and "; };
  // The first member not completed of the unit at the head of o's stream.
  auto head_member = [&](OpRef o) {
    const int s = core_.link(o.rank, core_.link(o.rank, o.index).unit).stream;
    const auto& q = core_.unit_streams()[static_cast<std::size_t>(s)].units;
    int j = q.front();
    while (core_.link(o.rank, j).done && action(o.rank, j).batch_next) ++j;
    return OpRef{o.rank, j};
  };
  auto stream_name = [&](OpRef o) {
    const int s = core_.link(o.rank, core_.link(o.rank, o.index).unit).stream;
    if (s < static_cast<int>(core_.ends().size()))
      return "rank " + n2s(o.rank) + "'s stream for pair " + pair_name(o);
    return "rank " + n2s(o.rank) + "'s " +
           (one_stream_per_rank(core_.model()) ? "stream" : "stream for groups");
  };
  auto queue_behind = [&](OpRef waiting, OpRef blocker) {
    bool again = std::find(seen.begin(), seen.end(), blocker) != seen.end();
    prefix += std::string(seen.size() == 1 ? "" : "which waits on ") + act(waiting) +
              " queues behind " + act(blocker) + " on " + stream_name(blocker) + ", ";
    seen.push_back(blocker);
    return !again;
  };
  for (int step = 0; step < 2 * n_ + 2; ++step) {
    if (!core_.at_head(id.rank, core_.link(id.rank, id.index).unit)) {
      const OpRef h = head_member(id);
      if (!queue_behind(id, h)) break;
      id = h;
      continue;
    }
    const OpRef p = match_of(id);
    if (!p.valid())
      return lead() + act(id) + " has no partner: rank " + n2s(peer_of(id)) + " posts fewer " +
             (is_send(action(id).type) ? "receives from" : "sends to") + " rank " + n2s(id.rank);
    if (!posted(p)) {
      waits_for = p.rank;
      return lead() + "rank " + n2s(p.rank) + " has not posted " + act(p) + ", which " + act(id) +
             " meets, yet";
    }
    if (!core_.at_head(p.rank, core_.link(p.rank, p.index).unit)) {
      const OpRef h = head_member(p);
      if (!queue_behind(p, h)) break;
      id = h;
      continue;
    }
    return lead() + act(id) + " is ready but did not complete (internal)";
  }
  return prefix + "again: these stream heads wait on each other in a cycle";
}

// One "stuck" line per rank that cannot finish, noting for the chain where
// it stands and which rank's missing post it waits for.
std::vector<int> Proof::report_stuck(std::vector<Diagnostic>& out, Chain& chain) const {
  std::vector<int> stuck;
  for (int r = 0; r < n_; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const auto& list = plan_.ranks[ru];
    const std::size_t pcr = core_.pc(r);
    if (pcr >= list.size() && !pending(r)) continue;
    stuck.push_back(r);
    OpRef blocked;
    std::string msg;
    int index = static_cast<int>(pcr);
    std::string action_text;
    if (pcr < list.size() && is_comm(list[pcr].type)) {  // only a group holds a rank
      std::size_t j = pcr;
      while (done({r, static_cast<int>(j)}) && list[j].batch_next) ++j;
      blocked = {r, static_cast<int>(j)};
      action_text.clear();
      append_cell(action_text, &list[pcr], cell_size(list, pcr));
      chain.at[ru] = action_text;
      msg = "rank " + n2s(r) + " is stuck at index " + n2s(index) + " (" + action_text +
            "): the group waits for " + act(blocked) + ", but ";
    } else if (pcr < list.size()) {
      blocked = blocking_recv(core_, core_.model(), r, list[pcr]);
      action_text = to_string(list[pcr]);
      chain.at[ru] = action_text;
      msg = "rank " + n2s(r) + " is stuck at index " + n2s(index) + " (" + action_text +
            "): it needs " + act(blocked) + ", but ";
    } else {
      blocked = first_pending(r);
      index = -1;
      chain.at[ru] = "end of step";
      msg = "rank " + n2s(r) + " reached the end of its list but " + act(blocked) +
            " never completes: ";
    }
    int w = -1;
    std::string reason = why(blocked, w);
    msg += reason;
    chain.waits[ru] = w;
    if (w < 0) chain.roots[ru] = reason;
    out.push_back({"stuck", r, index, action_text, msg});
  }
  return stuck;
}

// The chain of waiting ranks from `first`, ending in a cycle or a root cause.
std::string Proof::waiting_chain(const Chain& c, int first) const {
  std::string chain;
  std::vector<char> seen(static_cast<std::size_t>(n_), 0);
  int r = first;
  while (r >= 0) {
    const auto ru = static_cast<std::size_t>(r);
    chain +=
        (chain.empty() ? "" : " -> ") + std::string("rank ") + n2s(r) + " (at " + c.at[ru] + ")";
    if (seen[ru]) {
      chain += " [cycle]";
      break;
    }
    seen[ru] = 1;
    if (c.waits[ru] < 0 && !c.roots[ru].empty()) chain += ": " + c.roots[ru];
    r = c.waits[ru];
    if (r >= 0 && c.at[static_cast<std::size_t>(r)].empty()) {
      chain += " -> rank " + n2s(r) + " (finished)";
      break;
    }
  }
  return chain;
}

void Proof::report(std::vector<Diagnostic>& out) const {
  Chain chain;
  chain.waits.assign(static_cast<std::size_t>(n_), -1);
  chain.at.assign(static_cast<std::size_t>(n_), {});
  chain.roots.assign(static_cast<std::size_t>(n_), {});
  const std::vector<int> stuck = report_stuck(out, chain);
  if (stuck.empty()) return;
  std::string ranks;
  for (int s : stuck) ranks += (ranks.empty() ? "" : ", ") + n2s(s);
  out.push_back({"deadlock", -1, -1, "",
                 "deadlock under " + std::string(to_string(core_.model())) +
                     " transport: " + n2s(static_cast<long long>(stuck.size())) + " of " + n2s(n_) +
                     " ranks cannot finish (" + ranks +
                     "); waiting chain: " + waiting_chain(chain, stuck.front())});
}

}  // namespace pipeplan::detail
