// verify(): structural checks, the static pair-FIFO check, and a progress
// simulation under one transport model. Linear in the number of actions.
#include <algorithm>
#include <deque>
#include <string>

#include "pipeplan/verify.h"
#include "verify/index.h"

namespace pipeplan {
namespace {

std::string n2s(long long v) { return std::to_string(v); }

// Payload identity of a transfer: direction, sending stage, microbatch.
struct Payload {
  bool grad = false;
  int send_stage = 0, mb = 0;
  bool operator==(const Payload& o) const {
    return grad == o.grad && send_stage == o.send_stage && mb == o.mb;
  }
};

Payload payload_of(const Action& a) {
  switch (a.type) {
    case ActionType::SendF: return {false, a.stage, a.microbatch};
    case ActionType::RecvF: return {false, a.stage - 1, a.microbatch};
    case ActionType::SendB: return {true, a.stage, a.microbatch};
    default: return {true, a.stage + 1, a.microbatch};  // RecvB
  }
}

struct Op {
  int rank = 0, index = 0, peer = 0;
  bool send = false;
  Payload payload;
  int partner = -1;   // op at the same pair position on the peer (FIFO models)
  int stream = 0;     // in-order stream the op sits in
  int pair_pos = 0;   // position among this rank's ops towards `peer`
  bool posted = false, done = false;
};

class Simulator {
 public:
  Simulator(const Plan& plan, Transport model)
      : plan_(plan), meta_(plan.meta), model_(model), n_(plan.meta.pp_degree),
        index_(plan.meta.num_stages(), plan.meta.num_microbatches) {}

  void run(std::vector<Diagnostic>& out) {
    build();
    if (model_ != Transport::Eager) fifo_check(out);
    simulate();
    report(out);
  }

 private:
  std::size_t end_id(int rank, int peer) const { return static_cast<std::size_t>(rank) * n_ + peer; }

  void build() {
    op_of_.resize(plan_.ranks.size());
    std::vector<std::vector<int>> ends(static_cast<std::size_t>(n_) * n_);
    for (int r = 0; r < n_; ++r) {
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      op_of_[static_cast<std::size_t>(r)].assign(list.size(), -1);
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const Action& a = list[static_cast<std::size_t>(i)];
        if (a.type == ActionType::OverlapFB) {
          index_.at(a.stage, a.microbatch, detail::kF) = {r, i};
          index_.at(a.sub_stage, a.sub_microbatch, detail::kB) = {r, i};
          continue;
        }
        if (is_passthrough(a.type)) continue;
        index_.at(a.stage, a.microbatch, detail::slot_of(a.type)) = {r, i};
        if (!is_comm(a.type)) continue;
        Op op;
        op.rank = r;
        op.index = i;
        op.send = is_send(a.type);
        op.payload = payload_of(a);
        int peer_stage = (a.type == ActionType::SendF || a.type == ActionType::RecvB) ? a.stage + 1
                                                                                      : a.stage - 1;
        op.peer = meta_.rank_of(peer_stage);
        auto& e = ends[end_id(r, op.peer)];
        op.pair_pos = static_cast<int>(e.size());
        e.push_back(static_cast<int>(ops_.size()));
        op_of_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = static_cast<int>(ops_.size());
        ops_.push_back(op);
      }
    }
    ends_ = ends;
    for (int a = 0; a < n_; ++a)
      for (int b = 0; b < n_; ++b) {
        const auto& ea = ends[end_id(a, b)];
        const auto& eb = ends[end_id(b, a)];
        for (std::size_t k = 0; k < ea.size() && k < eb.size(); ++k)
          ops_[static_cast<std::size_t>(ea[k])].partner = eb[k];
      }
    // Streams: one per (rank, peer) end for rendezvous, one per rank for serial.
    if (model_ == Transport::Serial) {
      streams_.resize(static_cast<std::size_t>(n_));
      for (std::size_t k = 0; k < ops_.size(); ++k) {
        ops_[k].stream = ops_[k].rank;
        streams_[static_cast<std::size_t>(ops_[k].rank)].push_back(static_cast<int>(k));
      }
    } else {
      streams_.resize(ends.size());
      for (std::size_t e = 0; e < ends.size(); ++e)
        for (int id : ends[e]) {
          ops_[static_cast<std::size_t>(id)].stream = static_cast<int>(e);
          streams_[e].push_back(id);
        }
    }
    head_.assign(streams_.size(), 0);
    // Eager matching by payload.
    if (model_ == Transport::Eager) {
      match_.assign(ops_.size(), -1);
      const int S = meta_.num_stages(), M = meta_.num_microbatches;
      std::vector<int> sender(static_cast<std::size_t>(2) * S * M, -1);
      auto key = [&](const Payload& p) {
        return (static_cast<std::size_t>(p.grad) * S + p.send_stage) * M + p.mb;
      };
      for (std::size_t k = 0; k < ops_.size(); ++k)
        if (ops_[k].send) sender[key(ops_[k].payload)] = static_cast<int>(k);
      for (std::size_t k = 0; k < ops_.size(); ++k)
        if (!ops_[k].send) {
          int s = sender[key(ops_[k].payload)];
          match_[k] = s;
          if (s >= 0) match_[static_cast<std::size_t>(s)] = static_cast<int>(k);
        }
    }
  }

  std::string act(int op) const {
    const Op& o = ops_[static_cast<std::size_t>(op)];
    return to_string(plan_.ranks[static_cast<std::size_t>(o.rank)][static_cast<std::size_t>(o.index)]);
  }
  std::string pair_name(const Op& o) const {
    return n2s(std::min(o.rank, o.peer)) + "-" + n2s(std::max(o.rank, o.peer));
  }

  // First non-complementary position of each pair (and payload corruption).
  void fifo_check(std::vector<Diagnostic>& out) {
    for (int a = 0; a < n_; ++a)
      for (int b = a + 1; b < n_; ++b) {
        const auto& ea = ends_[end_id(a, b)];
        const auto& eb = ends_[end_id(b, a)];
        bool hang_reported = false, corrupt_reported = false;
        for (std::size_t k = 0; k < ea.size() && k < eb.size(); ++k) {
          const Op& x = ops_[static_cast<std::size_t>(ea[k])];
          const Op& y = ops_[static_cast<std::size_t>(eb[k])];
          std::string head = "pair " + n2s(a) + "-" + n2s(b) + " position " + n2s(static_cast<long long>(k)) + ": ";
          if (x.send == y.send && !hang_reported) {
            hang_reported = true;
            out.push_back({x.send ? "fifo-both-send" : "fifo-both-recv", a, x.index, act(ea[k]),
                           head + "rank " + n2s(a) + " posts " + act(ea[k]) + " while rank " + n2s(b) +
                               " posts " + act(eb[k]) +
                               (x.send ? " (both send; NCCL pair stream hangs)"
                                       : " (both receive; NCCL pair stream hangs)")});
          } else if (x.send != y.send && !(x.payload == y.payload) && !corrupt_reported) {
            corrupt_reported = true;
            const Op& s = x.send ? x : y;
            const Op& r = x.send ? y : x;
            int sid = x.send ? ea[k] : eb[k], rid = x.send ? eb[k] : ea[k];
            out.push_back({"fifo-corruption", r.rank, r.index, act(rid),
                           head + "rank " + n2s(s.rank) + " sends " + act(sid) + " while rank " +
                               n2s(r.rank) + " receives " + act(rid) +
                               " (payload mismatch: the data would be silently corrupted)"});
          }
        }
      }
  }

  bool complementary(const Op& x, const Op& y) const { return x.send != y.send; }

  void complete(int id) {
    Op& o = ops_[static_cast<std::size_t>(id)];
    o.done = true;
    --pending_[static_cast<std::size_t>(o.rank)];
    wake(o.rank);
  }

  void wake(int r) {
    if (!queued_[static_cast<std::size_t>(r)]) {
      queued_[static_cast<std::size_t>(r)] = 1;
      work_.push_back(r);
    }
  }

  // FIFO models: complete x and its partner when both head their streams.
  void try_pair(int x) {
    std::deque<int> todo{x};
    while (!todo.empty()) {
      int id = todo.front();
      todo.pop_front();
      Op& o = ops_[static_cast<std::size_t>(id)];
      if (o.done || !o.posted || o.partner < 0) continue;
      Op& p = ops_[static_cast<std::size_t>(o.partner)];
      if (!p.posted || !complementary(o, p)) continue;
      auto at_head = [&](const Op& q, int qid) {
        const auto& s = streams_[static_cast<std::size_t>(q.stream)];
        std::size_t h = head_[static_cast<std::size_t>(q.stream)];
        return h < s.size() && s[h] == qid;
      };
      if (!at_head(o, id) || !at_head(p, o.partner)) continue;
      int pid = o.partner;
      complete(id);
      complete(pid);
      for (int sid : {o.stream, p.stream}) {
        std::size_t& h = head_[static_cast<std::size_t>(sid)];
        ++h;
        const auto& s = streams_[static_cast<std::size_t>(sid)];
        if (h < s.size()) todo.push_back(s[h]);
      }
    }
  }

  void post(int id) {
    Op& o = ops_[static_cast<std::size_t>(id)];
    o.posted = true;
    if (model_ == Transport::Eager) {
      if (o.send) {
        complete(id);
        int r = match_[static_cast<std::size_t>(id)];
        if (r >= 0 && ops_[static_cast<std::size_t>(r)].posted && !ops_[static_cast<std::size_t>(r)].done)
          complete(r);
      } else {
        int s = match_[static_cast<std::size_t>(id)];
        if (s >= 0 && ops_[static_cast<std::size_t>(s)].posted) complete(id);
      }
      return;
    }
    try_pair(id);
  }

  // The receive a compute action at (r, i) still waits for, or -1.
  int blocking_recv(int r, const Action& a) const {
    auto need = [&](int s, int mb, detail::Slot k) -> int {
      const detail::Loc& l = index_.at(s, mb, k);
      if (!l.present() || l.rank != r) return -1;
      int id = op_of_[static_cast<std::size_t>(r)][static_cast<std::size_t>(l.index)];
      return (id >= 0 && !ops_[static_cast<std::size_t>(id)].done) ? id : -1;
    };
    int w = -1;
    auto fwd = [&](int s, int mb) {
      if (w < 0 && s > 0 && crosses_ranks(meta_, s - 1)) w = need(s, mb, detail::kRecvF);
    };
    auto bwd = [&](int s, int mb) {
      if (w < 0 && s + 1 < meta_.num_stages() && crosses_ranks(meta_, s)) w = need(s, mb, detail::kRecvB);
    };
    if (a.type == ActionType::F) fwd(a.stage, a.microbatch);
    if (a.type == ActionType::B || a.type == ActionType::I) bwd(a.stage, a.microbatch);
    if (a.type == ActionType::OverlapFB) {
      fwd(a.stage, a.microbatch);
      bwd(a.sub_stage, a.sub_microbatch);
    }
    return w;
  }

  void simulate() {
    pc_.assign(static_cast<std::size_t>(n_), 0);
    pending_.assign(static_cast<std::size_t>(n_), 0);
    for (const Op& o : ops_) ++pending_[static_cast<std::size_t>(o.rank)];
    queued_.assign(static_cast<std::size_t>(n_), 1);
    for (int r = 0; r < n_; ++r) work_.push_back(r);
    while (!work_.empty()) {
      int r = work_.front();
      work_.pop_front();
      const auto ru = static_cast<std::size_t>(r);
      queued_[ru] = 0;
      const auto& list = plan_.ranks[ru];
      while (pc_[ru] < list.size()) {
        const Action& a = list[pc_[ru]];
        if (is_comm(a.type)) {
          ++pc_[ru];  // advance first: post() may wake this rank again
          post(op_of_[ru][pc_[ru] - 1]);
          continue;
        }
        if (is_compute(a.type) && blocking_recv(r, a) >= 0) break;
        ++pc_[ru];
      }
    }
  }

  // Why op `id` has not completed; sets `waits_for` to the rank whose missing
  // post is the cause (or -1 for a non-complementary position).
  std::string why(int id, int& waits_for) const {
    waits_for = -1;
    std::string prefix;
    auto head_of = [&](int qid) {
      const Op& q = ops_[static_cast<std::size_t>(qid)];
      const auto& s = streams_[static_cast<std::size_t>(q.stream)];
      std::size_t h = head_[static_cast<std::size_t>(q.stream)];
      return h < s.size() ? s[h] : qid;
    };
    auto queue_behind = [&](int blocker) {
      const Op& b = ops_[static_cast<std::size_t>(blocker)];
      prefix += "it queues behind " + act(blocker) + " (pair " + pair_name(b) + " position " +
                n2s(b.pair_pos) + " on rank " + n2s(b.rank) + "), and ";
    };
    for (int step = 0; step < 2 * n_ + 2; ++step) {
      const Op& o = ops_[static_cast<std::size_t>(id)];
      std::string where = "pair " + pair_name(o) + " position " + n2s(o.pair_pos);
      if (model_ == Transport::Eager) {
        int s = match_[static_cast<std::size_t>(id)];
        if (s < 0) return act(id) + " has no matching send";
        waits_for = ops_[static_cast<std::size_t>(s)].rank;
        return "rank " + n2s(waits_for) + " has not posted " + act(s) + " yet";
      }
      if (int h = head_of(id); h != id) {
        queue_behind(h);
        id = h;
        continue;
      }
      if (o.partner < 0)
        return prefix + act(id) + " (" + where + ") has no partner: rank " + n2s(o.peer) +
               " posts fewer operations towards rank " + n2s(o.rank);
      const Op& p = ops_[static_cast<std::size_t>(o.partner)];
      if (!p.posted) {
        waits_for = p.rank;
        return prefix + "rank " + n2s(p.rank) + " has not posted its " + act(o.partner) + " (" +
               where + ") yet";
      }
      if (!complementary(o, p))
        return prefix + where + " is non-complementary: rank " + n2s(o.rank) + " posts " + act(id) +
               " while rank " + n2s(p.rank) + " posts " + act(o.partner) +
               (o.send ? " (both send)" : " (both receive)");
      if (int h = head_of(o.partner); h != o.partner) {
        queue_behind(h);
        id = h;
        continue;
      }
      return prefix + act(id) + " is ready but did not complete (internal)";
    }
    return prefix + "the stream heads wait on each other in a cycle";
  }

  void report(std::vector<Diagnostic>& out) {
    std::vector<int> stuck, waits(static_cast<std::size_t>(n_), -1);
    std::vector<std::string> at(static_cast<std::size_t>(n_)), roots(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const auto& list = plan_.ranks[ru];
      if (pc_[ru] >= list.size() && pending_[ru] == 0) continue;
      stuck.push_back(r);
      int blocked = -1;
      std::string msg;
      int index = static_cast<int>(pc_[ru]);
      std::string action;
      if (pc_[ru] < list.size()) {
        blocked = blocking_recv(r, list[pc_[ru]]);
        action = to_string(list[pc_[ru]]);
        at[ru] = action;
        msg = "rank " + n2s(r) + " is stuck at index " + n2s(index) + " (" + action + "): it needs " +
              act(blocked) + ", but ";
      } else {
        for (std::size_t k = 0; k < ops_.size() && blocked < 0; ++k)
          if (ops_[k].rank == r && !ops_[k].done) blocked = static_cast<int>(k);
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
      out.push_back({"stuck", r, index, action, msg});
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
                   "deadlock under " + std::string(to_string(model_)) + " transport: " +
                       n2s(static_cast<long long>(stuck.size())) + " of " + n2s(n_) +
                       " ranks cannot finish (" + ranks + "); waiting chain: " + chain});
  }

  const Plan& plan_;
  const PlanMeta& meta_;
  Transport model_;
  int n_;
  detail::PlanIndex index_;
  std::vector<Op> ops_;
  std::vector<std::vector<int>> op_of_, ends_, streams_;
  std::vector<std::size_t> head_;
  std::vector<int> match_;
  std::vector<std::size_t> pc_;
  std::vector<int> pending_;
  std::vector<char> queued_;
  std::deque<int> work_;
};

}  // namespace

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::Rendezvous: return "rendezvous";
    case Transport::Eager: return "eager";
    default: return "serial";
  }
}

std::optional<Transport> parse_transport(std::string_view s) {
  if (s == "rendezvous") return Transport::Rendezvous;
  if (s == "eager") return Transport::Eager;
  if (s == "serial") return Transport::Serial;
  return std::nullopt;
}

VerifyResult verify(const Plan& plan, const VerifyOptions& options) {
  VerifyResult res;
  res.diagnostics = check_structure(plan, options.max_diagnostics);
  if (!res.diagnostics.empty()) return res;
  Simulator(plan, options.transport).run(res.diagnostics);
  return res;
}

std::string format_diagnostics(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) {
    out += "error[" + d.code + "]";
    if (d.rank >= 0) out += " rank " + n2s(d.rank);
    if (d.index >= 0) out += " index " + n2s(d.index);
    if (!d.action.empty()) out += " (" + d.action + ")";
    out += ": " + d.message + "\n";
  }
  return out;
}

}  // namespace pipeplan
