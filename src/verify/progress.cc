// verify(): structural checks, the static pair-FIFO check, and a progress
// simulation under one transport model. Linear in the number of actions.
//
// The simulation keeps counters, not per-operation records: every end
// (rank, peer) posts its operations in program order and, under the FIFO
// models, completes them in that order too, so "posted" and "done" of an
// end are two counters, and the operation at end position k pairs with
// position k of the reverse end. Memory: 4 bytes per SEND/RECV (each end's
// action indices) plus 8 per (stage, microbatch), beside the shared index.
// Reports (failure only) rebuild per-operation detail from those counters.
#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <string>

#include "ir/deps.h"
#include "pipeplan/error.h"
#include "pipeplan/verify.h"
#include "verify/index.h"
#include "verify/payload.h"

namespace pipeplan {
namespace {

using detail::kPrefetchAhead;
using detail::Payload;
using detail::payload_of;
using detail::prefetch;

using detail::n2s;

// A SEND/RECV named by its place in the plan (failure reports only).
struct OpRef {
  int rank = -1, index = -1;
  bool valid() const { return rank >= 0; }
  bool operator==(const OpRef& o) const { return rank == o.rank && index == o.index; }
  bool operator!=(const OpRef& o) const { return !(*this == o); }
};

class Simulator {
 public:
  Simulator(const Plan& plan, Transport model, const detail::PlanIndex& index)
      : plan_(plan), model_(model), n_(plan.meta.pp_degree), index_(index) {}

  void run(std::vector<Diagnostic>& out) {
    build();
    simulate();
    // A clean run needs no per-operation record; reports rebuild one.
    const bool finished = all_done();
    if (!finished || corrupt_) fill_ends();
    if (model_ != Transport::Eager) {
      if (finished) report_corruption(out);  // every position was checked on completion
      else fifo_check(out);
    }
    if (!finished) report(out);  // else no rank is stuck
  }

 private:
  // One end: the operations `rank` posts towards `peer`, in program order.
  struct End {
    int rank = 0, peer = 0, rev = -1;
    std::size_t begin = 0, end = 0;  // range in idx_ (filled for reports only)
    int posted = 0, done = 0;
    std::deque<std::int32_t> pending;  // FIFO models: indices posted, not done yet
    std::int32_t last_done = -1;       // index of the last completed operation
    int corrupt = -1;                  // first completed position whose payloads differ
    bool stalled = false;              // a non-complementary position was reached
    int count() const { return static_cast<int>(end - begin); }
  };

  // ---- layout ----------------------------------------------------------

  int end_id(int rank, int peer) {
    auto [it, inserted] =
        end_ids_.emplace(std::make_pair(rank, peer), static_cast<int>(ends_.size()));
    if (inserted) {
      ends_.emplace_back();
      ends_.back().rank = rank;
      ends_.back().peer = peer;
    }
    return it->second;
  }

  // End of a SEND/RECV from its type and stage (the plan passed the
  // structure checks, so the peer stage exists on another rank).
  int end_of(const Action& a) const {
    const auto s = static_cast<std::size_t>(a.stage);
    return deps::peer_stage(a) > a.stage ? down_[s] : up_[s];
  }

  void build() {
    const int S = index_.stages;
    up_.assign(static_cast<std::size_t>(S), -1);
    down_.assign(static_cast<std::size_t>(S), -1);
    for (int s = 0; s < S; ++s) {
      const int r = index_.rank_of[static_cast<std::size_t>(s)];
      if (s > 0 && index_.crosses(s - 1))
        up_[static_cast<std::size_t>(s)] =
            end_id(r, index_.rank_of[static_cast<std::size_t>(s) - 1]);
      if (s + 1 < S && index_.crosses(s))
        down_[static_cast<std::size_t>(s)] =
            end_id(r, index_.rank_of[static_cast<std::size_t>(s) + 1]);
    }
    for (End& e : ends_) {
      auto it = end_ids_.find({e.peer, e.rank});
      e.rev = it == end_ids_.end() ? -1 : it->second;
    }
    ends_of_.assign(static_cast<std::size_t>(n_), {});
    for (std::size_t e = 0; e < ends_.size(); ++e)
      ends_of_[static_cast<std::size_t>(ends_[e].rank)].push_back(static_cast<int>(e));

    // Each end's range comes from the per-stage counts the structure scan
    // kept; ranks fill it in program order as they post.
    std::vector<std::size_t> count(ends_.size(), 0);
    for (int s = 0; s < S; ++s) {
      const auto* c = &index_.comm_count[static_cast<std::size_t>(s) * 4];
      const int up = up_[static_cast<std::size_t>(s)], down = down_[static_cast<std::size_t>(s)];
      if (down >= 0)
        count[static_cast<std::size_t>(down)] +=
            c[detail::comm_slot(detail::kSendF)] + c[detail::comm_slot(detail::kRecvB)];
      if (up >= 0)
        count[static_cast<std::size_t>(up)] +=
            c[detail::comm_slot(detail::kRecvF)] + c[detail::comm_slot(detail::kSendB)];
    }
    std::size_t total = 0;
    for (std::size_t e = 0; e < ends_.size(); ++e) {
      ends_[e].begin = total;
      total += count[e];
      ends_[e].end = total;
    }
    idx_total_ = total;
  }

  std::size_t key(int s, int mb) const { return static_cast<std::size_t>(s) * index_.mbs + mb; }
  const Action& action(int rank, int index) const {
    return plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const Action& action(OpRef o) const { return action(o.rank, o.index); }
  std::string act(OpRef o) const { return to_string(action(o)); }
  OpRef op_at(int e, int pos) const {
    const End& x = ends_[static_cast<std::size_t>(e)];
    return {x.rank, idx_[x.begin + static_cast<std::size_t>(pos)]};
  }

  // ---- static FIFO check ----------------------------------------------

  // First non-complementary position of each pair (and payload corruption),
  // pairs in rank order.
  void fifo_check(std::vector<Diagnostic>& out) {
    for (const auto& [ranks, e] : end_ids_) {
      const int a = ranks.first, b = ranks.second;
      End& ea = ends_[static_cast<std::size_t>(e)];
      if (a > b || ea.rev < 0) continue;
      End& eb = ends_[static_cast<std::size_t>(ea.rev)];
      bool hang_reported = false, corrupt_reported = false;
      const int n = std::min(ea.count(), eb.count());
      for (int k = 0; k < n && !(hang_reported && corrupt_reported); ++k) {
        const OpRef xr = op_at(e, k), yr = op_at(ea.rev, k);
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
                         head(a, b, k) + "rank " + n2s(s.rank) + " sends " + act(s) +
                             " while rank " + n2s(r.rank) + " receives " + act(r) +
                             " (payload mismatch: the data would be silently corrupted)"});
        }
      }
    }
  }

  static std::string head(int a, int b, int k) {
    return "pair " + n2s(a) + "-" + n2s(b) + " position " + n2s(k) + ": ";
  }

  // The corruption diagnostics fifo_check would give for a plan whose every
  // position completed (so none is non-complementary), pairs in rank order.
  void report_corruption(std::vector<Diagnostic>& out) const {
    for (const auto& [ranks, e] : end_ids_) {
      const End& ea = ends_[static_cast<std::size_t>(e)];
      if (ranks.first > ranks.second || ea.rev < 0 || ea.corrupt < 0) continue;
      const int k = ea.corrupt;
      const OpRef xr = op_at(e, k), yr = op_at(ea.rev, k);
      const bool xs = is_send(action(xr).type);
      const OpRef sr = xs ? xr : yr, rr = xs ? yr : xr;
      out.push_back({"fifo-corruption", rr.rank, rr.index, act(rr),
                     head(ranks.first, ranks.second, k) + "rank " + n2s(sr.rank) + " sends " +
                         act(sr) + " while rank " + n2s(rr.rank) + " receives " + act(rr) +
                         " (payload mismatch: the data would be silently corrupted)"});
    }
  }

  bool all_done() const {
    for (int r = 0; r < n_; ++r)
      if (pc_[static_cast<std::size_t>(r)] < plan_.ranks[static_cast<std::size_t>(r)].size())
        return false;
    for (const End& e : ends_)
      if (e.posted != e.count() || (model_ != Transport::Eager && e.done != e.count()))
        return false;
    return true;
  }

  // Every end's operations (action indices, program order), for reports.
  void fill_ends() {
    idx_.assign(idx_total_, -1);
    std::vector<std::size_t> next(ends_.size());
    for (std::size_t e = 0; e < ends_.size(); ++e) next[e] = ends_[e].begin;
    for (int r = 0; r < n_; ++r) {
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i)
        if (is_comm(list[i].type))
          idx_[next[static_cast<std::size_t>(end_of(list[i]))]++] = static_cast<std::int32_t>(i);
    }
  }

  // ---- progress -------------------------------------------------------

  void wake(int r) {
    if (!queued_[static_cast<std::size_t>(r)]) {
      queued_[static_cast<std::size_t>(r)] = 1;
      work_.push_back(r);
    }
  }

  // Completes position e.done of a pair when it is complementary (FIFO
  // models); notes the first payload mismatch. False at a non-complementary
  // position, which never completes.
  bool complete_next(End& e, End& f) {
    const Action& x = action(e.rank, e.pending.front());
    const Action& y = action(f.rank, f.pending.front());
    if (is_send(x.type) == is_send(y.type)) {
      e.stalled = f.stalled = true;
      return false;
    }
    if (e.corrupt < 0 && !(payload_of(x) == payload_of(y))) {
      e.corrupt = f.corrupt = e.done;
      corrupt_ = true;
    }
    e.last_done = e.pending.front();
    f.last_done = f.pending.front();
    e.pending.pop_front();
    f.pending.pop_front();
    ++e.done;
    ++f.done;
    return true;
  }

  // Rendezvous: both ends complete position after position while both
  // posted it and the pair is still complementary there.
  void try_pair(End& e) {
    if (e.rev < 0 || e.stalled) return;
    End& f = ends_[static_cast<std::size_t>(e.rev)];
    if (e.pending.empty() || f.pending.empty()) return;
    while (!e.pending.empty() && !f.pending.empty() && complete_next(e, f)) {
    }
    wake(e.rank);
    wake(f.rank);
  }

  // Next SEND/RECV of rank r at or after index i (its serial stream head).
  int next_comm(int r, int i) const {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    while (i < static_cast<int>(list.size()) && !is_comm(list[static_cast<std::size_t>(i)].type))
      ++i;
    return i;
  }

  // Serial: the heads of two ranks' streams complete together when they sit
  // at the same position of the pair, both posted and complementary.
  void try_serial(int a) {
    while (true) {
      const int h = shead_[static_cast<std::size_t>(a)];
      if (h >= static_cast<int>(pc_[static_cast<std::size_t>(a)])) return;  // not posted yet
      End& e = ends_[static_cast<std::size_t>(end_of(action(a, h)))];
      if (e.rev < 0 || e.stalled) return;
      End& f = ends_[static_cast<std::size_t>(e.rev)];
      if (f.pending.empty()) return;  // the partner is not posted (or does not exist)
      const int p = f.pending.front();
      const auto pb = static_cast<std::size_t>(f.rank);
      if (shead_[pb] != p) return;
      if (!complete_next(e, f)) return;
      shead_[static_cast<std::size_t>(a)] = next_comm(a, h + 1);
      shead_[pb] = next_comm(f.rank, p + 1);
      wake(a);
      wake(f.rank);
    }
  }

  // Eager: a SEND completes when posted; a RECV once its SEND is posted.
  bool eager_send_posted(ActionType send_t, int send_s, int mb) const {
    const detail::Loc l = index_.at(send_s, mb, detail::slot_of(send_t));
    return l.present() && l.index < static_cast<int>(pc_[static_cast<std::size_t>(l.rank)]);
  }

  // Whether the receive of direction `grad` into (s, mb) on rank r is done.
  // Eager: once its send is posted. FIFO models: an end completes in program
  // order, so the receive at end position k is done once k < done; k comes
  // from the rank's last few receives (a receive sits right before its
  // consumer in lowered plans), else from the index.
  bool recv_done(int r, bool grad, int s, int mb) const {
    if (model_ == Transport::Eager) {
      const int send_s = grad ? s + 1 : s - 1;
      return sent_[grad ? 1 : 0][key(send_s, mb)];
    }
    const End& e = ends_[static_cast<std::size_t>(grad ? down_[static_cast<std::size_t>(s)]
                                                       : up_[static_cast<std::size_t>(s)])];
    for (const RecentRecv& x : recent_[static_cast<std::size_t>(r)])
      if (x.stage == s && x.mb == mb && x.grad == grad) return e.done > x.pos;
    const std::int32_t j = index_.raw(s, mb, grad ? detail::kRecvB : detail::kRecvF);
    return e.last_done >= j;  // an end completes in program order
  }

  // The receive a compute action still waits for, or an invalid ref.
  OpRef blocking_recv(int r, const Action& a) const {
    OpRef w;
    auto fwd = [&](int s, int mb) {
      if (w.valid() || s <= 0 || up_[static_cast<std::size_t>(s)] < 0) return;
      if (!recv_done(r, false, s, mb)) w = {r, index_.raw(s, mb, detail::kRecvF)};
    };
    auto bwd = [&](int s, int mb) {
      if (w.valid() || down_[static_cast<std::size_t>(s)] < 0) return;
      if (!recv_done(r, true, s, mb)) w = {r, index_.raw(s, mb, detail::kRecvB)};
    };
    deps::for_each_input(a, index_.stages, [&](const deps::Value& v, int s) {
      if (v.stage == s) return;  // kept on this stage: no receive
      if (v.kind == deps::Kind::Forward) fwd(s, v.microbatch);
      else bwd(s, v.microbatch);
    });
    return w;
  }

  void simulate() {
    recent_.assign(static_cast<std::size_t>(n_), {});
    recent_next_.assign(static_cast<std::size_t>(n_), 0);
    if (model_ == Transport::Eager) {
      const std::size_t keys = static_cast<std::size_t>(index_.stages) * index_.mbs;
      sent_[0].assign(keys, false);
      sent_[1].assign(keys, false);
    }
    pc_.assign(static_cast<std::size_t>(n_), 0);
    shead_.assign(static_cast<std::size_t>(n_), 0);
    if (model_ == Transport::Serial)
      for (int r = 0; r < n_; ++r) shead_[static_cast<std::size_t>(r)] = next_comm(r, 0);
    queued_.assign(static_cast<std::size_t>(n_), 1);
    for (int r = 0; r < n_; ++r) work_.push_back(r);
    while (!work_.empty()) {
      const int r = work_.front();
      work_.pop_front();
      const auto ru = static_cast<std::size_t>(r);
      queued_[ru] = 0;
      const auto& list = plan_.ranks[ru];
      std::size_t pc = pc_[ru];
      while (pc < list.size()) {
        // Ranks take turns every few actions, so the hardware does not see
        // a stream: fetch this rank's next lines ahead of time.
        prefetch(list.data() + std::min(pc + kPrefetchAhead, list.size() - 1));
        const Action& a = list[pc];
        if (is_comm(a.type)) {
          End& e = ends_[static_cast<std::size_t>(end_of(a))];
          if (is_recv(a.type)) {
            recent_[ru][recent_next_[ru]++ % kRecent] = {a.stage, a.microbatch, e.posted,
                                                         a.type == ActionType::RecvB};
          } else if (model_ == Transport::Eager) {
            sent_[a.type == ActionType::SendB ? 1 : 0][key(a.stage, a.microbatch)] = true;
          }
          ++e.posted;
          if (model_ != Transport::Eager) e.pending.push_back(static_cast<std::int32_t>(pc));
          pc_[ru] = ++pc;  // posted
          if (model_ == Transport::Rendezvous) try_pair(e);
          else if (model_ == Transport::Serial) try_serial(r);
          else if (is_send(a.type)) wake(e.peer);
          continue;
        }
        if (is_compute(a.type) && blocking_recv(r, a).valid()) break;
        pc_[ru] = ++pc;
      }
      if (model_ == Transport::Serial) try_serial(r);
    }
  }

  // ---- failure reports (rebuilt from the counters) ---------------------

  int pair_pos(OpRef o) const {
    const End& e = ends_[static_cast<std::size_t>(end_of(action(o)))];
    auto first = idx_.begin() + static_cast<std::ptrdiff_t>(e.begin);
    auto last = idx_.begin() + static_cast<std::ptrdiff_t>(e.end);
    return static_cast<int>(std::lower_bound(first, last, o.index) - first);
  }
  bool posted(OpRef o) const {
    return o.index < static_cast<int>(pc_[static_cast<std::size_t>(o.rank)]);
  }
  bool done(OpRef o) const {
    if (!posted(o)) return false;
    const Action& a = action(o);
    if (model_ == Transport::Eager) {
      if (is_send(a.type)) return true;
      const ActionType send = a.type == ActionType::RecvF ? ActionType::SendF : ActionType::SendB;
      return eager_send_posted(send, deps::peer_stage(a), a.microbatch);
    }
    return pair_pos(o) < ends_[static_cast<std::size_t>(end_of(a))].done;
  }
  // The op sitting at position pair_pos(o) of the reverse end, if any.
  OpRef partner(OpRef o) const {
    const End& e = ends_[static_cast<std::size_t>(end_of(action(o)))];
    const int k = pair_pos(o);
    if (e.rev < 0 || k >= ends_[static_cast<std::size_t>(e.rev)].count()) return {};
    return op_at(e.rev, k);
  }
  // Head of the in-order stream o sits in (o itself when that stream is done).
  OpRef head_of(OpRef o) const {
    if (model_ == Transport::Serial) {
      const int h = shead_[static_cast<std::size_t>(o.rank)];
      return h < static_cast<int>(plan_.ranks[static_cast<std::size_t>(o.rank)].size())
                 ? OpRef{o.rank, h}
                 : o;
    }
    const int e = end_of(action(o));
    const End& x = ends_[static_cast<std::size_t>(e)];
    return x.done < x.count() ? op_at(e, x.done) : o;
  }
  int peer_of(OpRef o) const { return ends_[static_cast<std::size_t>(end_of(action(o)))].peer; }
  std::string pair_name(OpRef o) const {
    const int peer = peer_of(o);
    return n2s(std::min(o.rank, peer)) + "-" + n2s(std::max(o.rank, peer));
  }
  bool pending(int r) const {
    if (model_ != Transport::Eager) {
      for (int e : ends_of_[static_cast<std::size_t>(r)]) {
        const End& x = ends_[static_cast<std::size_t>(e)];
        if (x.done < x.count()) return true;
      }
      return false;
    }
    return first_pending(r).valid();
  }
  OpRef first_pending(int r) const {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i)
      if (is_comm(list[static_cast<std::size_t>(i)].type) && !done({r, i})) return {r, i};
    return {};
  }

  // Why op `id` has not completed; sets `waits_for` to the rank whose missing
  // post is the cause (or -1 for a non-complementary position).
  std::string why(OpRef id, int& waits_for) const {
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
      if (model_ == Transport::Eager) {
        const Action& a = action(id);
        const detail::Loc s = a.type == ActionType::RecvF
                                  ? index_.at(deps::peer_stage(a), a.microbatch, detail::kSendF)
                                  : index_.at(deps::peer_stage(a), a.microbatch, detail::kSendB);
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
        return lead() + where + " is non-complementary: rank " + n2s(id.rank) + " posts " +
               act(id) + " while rank " + n2s(p.rank) + " posts " + act(p) +
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

  void report(std::vector<Diagnostic>& out) {
    std::vector<int> stuck, waits(static_cast<std::size_t>(n_), -1);
    std::vector<std::string> at(static_cast<std::size_t>(n_)), roots(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const auto& list = plan_.ranks[ru];
      if (pc_[ru] >= list.size() && !pending(r)) continue;
      stuck.push_back(r);
      OpRef blocked;
      std::string msg;
      int index = static_cast<int>(pc_[ru]);
      std::string action_text;
      if (pc_[ru] < list.size()) {
        blocked = blocking_recv(r, list[pc_[ru]]);
        action_text = to_string(list[pc_[ru]]);
        at[ru] = action_text;
        msg = "rank " + n2s(r) + " is stuck at index " + n2s(index) + " (" + action_text +
              "): it needs " + act(blocked) + ", but ";
      } else {
        blocked = first_pending(r);
        index = -1;
        at[ru] = "end of step";
        msg = "rank " + n2s(r) + " reached the end of its list but " + act(blocked) +
              " never completes: ";
      }
      int w = -1;
      std::string reason = why(blocked, w);
      msg += reason;
      waits[ru] = w;
      if (w < 0) roots[ru] = reason;
      out.push_back({"stuck", r, index, action_text, msg});
    }
    if (stuck.empty()) return;
    // Waiting chain from the first stuck rank.
    std::string chain;
    std::vector<char> seen(static_cast<std::size_t>(n_), 0);
    int r = stuck.front();
    while (r >= 0) {
      chain += (chain.empty() ? "" : " -> ") + std::string("rank ") + n2s(r) + " (at " +
               at[static_cast<std::size_t>(r)] + ")";
      if (seen[static_cast<std::size_t>(r)]) {
        chain += " [cycle]";
        break;
      }
      seen[static_cast<std::size_t>(r)] = 1;
      if (waits[static_cast<std::size_t>(r)] < 0 && !roots[static_cast<std::size_t>(r)].empty())
        chain += ": " + roots[static_cast<std::size_t>(r)];
      r = waits[static_cast<std::size_t>(r)];
      if (r >= 0 && at[static_cast<std::size_t>(r)].empty()) {
        chain += " -> rank " + n2s(r) + " (finished)";
        break;
      }
    }
    std::string ranks;
    for (int s : stuck) ranks += (ranks.empty() ? "" : ", ") + n2s(s);
    out.push_back({"deadlock", -1, -1, "",
                   "deadlock under " + std::string(to_string(model_)) +
                       " transport: " + n2s(static_cast<long long>(stuck.size())) + " of " +
                       n2s(n_) + " ranks cannot finish (" + ranks + "); waiting chain: " + chain});
  }

  const Plan& plan_;
  Transport model_;
  int n_;
  const detail::PlanIndex& index_;
  std::map<std::pair<int, int>, int> end_ids_;  // (rank, peer) -> end
  std::vector<End> ends_;
  std::vector<std::vector<int>> ends_of_;  // rank -> its ends
  std::vector<int> up_, down_;             // per stage: end towards stage-1 / stage+1
  std::vector<std::int32_t> idx_;          // action indices, end by end (reports)
  std::size_t idx_total_ = 0;
  bool corrupt_ = false;  // some pair completed a payload mismatch
  // A rank's last few posted receives: (stage, mb, end position, grad).
  struct RecentRecv {
    std::int32_t stage = -1, mb = -1, pos = 0;
    bool grad = false;
  };
  static constexpr std::size_t kRecent = 4;
  std::vector<std::array<RecentRecv, kRecent>> recent_;
  std::vector<std::uint32_t> recent_next_;
  std::vector<bool> sent_[2];  // eager: SEND_F / SEND_B posted per (stage, mb)
  std::vector<std::size_t> pc_;
  std::vector<int> shead_;  // serial: next SEND/RECV not done per rank
  std::vector<char> queued_;
  std::deque<int> work_;
};

}  // namespace

VerifyResult verify(const Plan& plan, const VerifyOptions& options) {
  VerifyResult res;
  if (!plan.is_whole()) {
    res.diagnostics = check_structure(plan, options.max_diagnostics);
    return res;
  }
  detail::check_plan_limits(plan);  // before the index sizes itself by the shape
  detail::PlanIndex index(plan.meta, plan.num_actions());
  res.diagnostics = detail::check_structure_indexed(plan, options.max_diagnostics, index);
  if (!res.diagnostics.empty()) return res;
  // A clean structure has every (stage, microbatch) row, so the index is dense.
  if (!index.dense()) throw InternalError("verify: a complete plan got a sparse index");
  Simulator(plan, options.transport, index).run(res.diagnostics);
  return res;
}

}  // namespace pipeplan
