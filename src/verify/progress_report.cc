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

// Every end's operations (action indices, program order).
void Proof::fill_ends() {
  idx_.assign(end_last_.empty() ? 0 : end_last_.back(), -1);
  std::vector<std::size_t> next = end_first_;
  for (int r = 0; r < n_; ++r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < list.size(); ++i)
      if (is_comm(list[i].type))
        idx_[next[static_cast<std::size_t>(comm_end(list[i]))]++] = static_cast<std::int32_t>(i);
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

// First non-complementary position of each pair (and payload corruption),
// pairs in rank order.
void Proof::fifo_check(std::vector<Diagnostic>& out) const {
  for (int id : pairs_in_rank_order()) {
    const int ea = 2 * id, eb = 2 * id + 1;
    const int a = core_.end(ea).rank, b = core_.end(eb).rank;
    bool hang_reported = false, corrupt_reported = false;
    const int n = std::min(count(ea), count(eb));
    for (int k = 0; k < n && !(hang_reported && corrupt_reported); ++k) {
      const OpRef xr = op_at(ea, k), yr = op_at(eb, k);
      const Action& x = action(xr);
      const Action& y = action(yr);
      const bool xs = is_send(x.type), ys = is_send(y.type);
      if (xs == ys) {
        if (hang_reported) continue;
        hang_reported = true;
        out.push_back({xs ? "fifo-both-send" : "fifo-both-recv", a, xr.index, act(xr),
                       head(a, b, k) + "rank " + n2s(a) + " posts " + act(xr) + " while rank " +
                           n2s(b) + " posts " + act(yr) +
                           (xs ? " (both send; NCCL pair stream hangs)"
                               : " (both receive; NCCL pair stream hangs)")});
      } else if (!corrupt_reported && !(payload_of(x) == payload_of(y))) {
        corrupt_reported = true;
        const OpRef s = xs ? xr : yr, r = xs ? yr : xr;
        out.push_back({"fifo-corruption", r.rank, r.index, act(r),
                       head(a, b, k) + "rank " + n2s(s.rank) + " sends " + act(s) + " while rank " +
                           n2s(r.rank) + " receives " + act(r) +
                           " (payload mismatch: the data would be silently corrupted)"});
      }
    }
  }
}

// The corruption diagnostics fifo_check would give for a plan whose every
// position completed (so none is non-complementary), pairs in rank order.
void Proof::report_corruption(std::vector<Diagnostic>& out) const {
  for (int id : pairs_in_rank_order()) {
    const int k = corrupt_[static_cast<std::size_t>(id)];
    if (k < 0) continue;
    const OpRef xr = op_at(2 * id, k), yr = op_at(2 * id + 1, k);
    const bool xs = is_send(action(xr).type);
    const OpRef sr = xs ? xr : yr, rr = xs ? yr : xr;
    out.push_back({"fifo-corruption", rr.rank, rr.index, act(rr),
                   head(core_.pairs()[static_cast<std::size_t>(id)].lo,
                        core_.pairs()[static_cast<std::size_t>(id)].hi, k) +
                       "rank " + n2s(sr.rank) + " sends " + act(sr) + " while rank " +
                       n2s(rr.rank) + " receives " + act(rr) +
                       " (payload mismatch: the data would be silently corrupted)"});
  }
}

// ---- where each op stands after the run ----------------------------------

int Proof::pair_pos(OpRef o) const {
  const int e = comm_end(action(o));
  auto first = idx_.begin() + static_cast<std::ptrdiff_t>(end_first_[static_cast<std::size_t>(e)]);
  auto last = idx_.begin() + static_cast<std::ptrdiff_t>(end_last_[static_cast<std::size_t>(e)]);
  return static_cast<int>(std::lower_bound(first, last, o.index) - first);
}

bool Proof::posted(OpRef o) const { return o.index < static_cast<int>(core_.pc(o.rank)); }

bool Proof::done(OpRef o) const {
  if (!posted(o)) return false;
  const Action& a = action(o);
  if (core_.model() == Transport::Eager) {
    if (is_send(a.type)) return true;
    const Slot send = a.type == ActionType::RecvF ? kSendF : kSendB;
    const Loc l = index_.at(deps::peer_stage(a), a.microbatch, send);
    return l.present() && l.index < static_cast<int>(core_.pc(l.rank));
  }
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
  if (core_.model() == Transport::Serial) {
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
  if (core_.model() != Transport::Eager) {
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
  for (int step = 0; step < 2 * n_ + 2; ++step) {
    std::string where = "pair " + pair_name(id) + " position " + n2s(pair_pos(id));
    if (core_.model() == Transport::Eager) {
      const Action& a = action(id);
      const Loc s = index_.at(deps::peer_stage(a), a.microbatch,
                              a.type == ActionType::RecvF ? kSendF : kSendB);
      if (!s.present()) return act(id) + " has no matching send";
      waits_for = s.rank;
      return "rank " + n2s(waits_for) + " has not posted " + act({s.rank, s.index}) + " yet";
    }
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
    if (pcr < list.size()) {
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
