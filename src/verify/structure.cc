// check_structure(): counts, ranges, placement and dependency order.
#include <string>

#include "pipeplan/verify.h"
#include "verify/index.h"

namespace pipeplan {
namespace detail {

Slot slot_of(ActionType t) {
  switch (t) {
    case ActionType::F: return kF;
    case ActionType::B: return kB;
    case ActionType::I: return kI;
    case ActionType::W: return kW;
    case ActionType::SendF: return kSendF;
    case ActionType::RecvF: return kRecvF;
    case ActionType::SendB: return kSendB;
    case ActionType::RecvB: return kRecvB;
    default: return kNumSlots;
  }
}

}  // namespace detail

namespace {

using detail::Loc;
using detail::PlanIndex;
using detail::Slot;

std::string act(ActionType t, int s, int mb) { return to_string(make(t, s, mb)); }
std::string n2s(long long v) { return std::to_string(v); }

class Checker {
 public:
  Checker(const Plan& plan, std::size_t max) : plan_(plan), meta_(plan.meta), max_(max),
        index_(plan.meta.num_stages(), plan.meta.num_microbatches) {}

  std::vector<Diagnostic> run() {
    with_comms_ = !plan_.is_compute_only();
    for (std::size_t r = 0; r < plan_.ranks.size() && !full(); ++r) scan_rank(static_cast<int>(r));
    if (!diags_.empty()) return diags_;  // counts and order assume in-range actions
    check_counts();
    if (with_comms_) check_comm_pairs();
    for (std::size_t r = 0; r < plan_.ranks.size() && !full(); ++r) check_order(static_cast<int>(r));
    return diags_;
  }

 private:
  bool full() const { return diags_.size() >= max_; }

  void add(std::string code, int rank, int index, std::string action, std::string message) {
    if (full()) return;
    diags_.push_back({std::move(code), rank, index, std::move(action), std::move(message)});
  }

  void add_at(const std::string& code, int rank, int index, const std::string& msg) {
    const Action& a = plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
    add(code, rank, index, to_string(a), msg);
  }

  // Records one plain action (or one half of an overlap group).
  void record(int rank, int index, ActionType t, int s, int mb) {
    const int S = meta_.num_stages();
    const std::string name = act(t, s, mb);
    const std::string where = "rank " + n2s(rank) + " index " + n2s(index) + ": ";
    if (s < 0 || s >= S) {
      add("stage-out-of-range", rank, index, name,
          where + name + " names stage " + n2s(s) + ", but the plan has " + n2s(S) +
              " stages (0.." + n2s(S - 1) + ")");
      return;
    }
    if (mb < 0 || mb >= meta_.num_microbatches) {
      add("microbatch-out-of-range", rank, index, name,
          where + name + " names microbatch " + n2s(mb) + ", but the plan has " +
              n2s(meta_.num_microbatches) + " microbatches (0.." +
              n2s(meta_.num_microbatches - 1) + ")");
      return;
    }
    if (meta_.rank_of(s) != rank) {
      add("wrong-rank", rank, index, name,
          where + name + " runs on rank " + n2s(rank) + ", but stage " + n2s(s) +
              " belongs to rank " + n2s(meta_.rank_of(s)) + " (" +
              std::string(to_string(meta_.mapping)) + " mapping)");
      return;
    }
    if (is_comm(t) && !check_comm_endpoint(rank, index, t, s, mb, name, where)) return;
    Loc& l = index_.at(s, mb, detail::slot_of(t));
    if (l.present()) {
      add("duplicate-action", rank, index, name,
          name + " appears twice: rank " + n2s(l.rank) + " index " + n2s(l.index) +
              " and rank " + n2s(rank) + " index " + n2s(index));
      return;
    }
    l = Loc{rank, index};
  }

  bool check_comm_endpoint(int rank, int index, ActionType t, int s, int mb,
                           const std::string& name, const std::string& where) {
    const int S = meta_.num_stages();
    (void)mb;
    int peer_stage = (t == ActionType::SendF || t == ActionType::RecvB) ? s + 1 : s - 1;
    if (peer_stage < 0 || peer_stage >= S) {
      add("bad-comm", rank, index, name,
          where + name + " has no peer: stage " + n2s(s) + " is the " +
              (peer_stage < 0 ? "first" : "last") + " stage");
      return false;
    }
    if (meta_.rank_of(peer_stage) == rank) {
      add("bad-comm", rank, index, name,
          where + name + " is not needed: stages " + n2s(std::min(s, peer_stage)) + " and " +
              n2s(std::max(s, peer_stage)) + " are both on rank " + n2s(rank));
      return false;
    }
    return true;
  }

  void scan_rank(int r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      if (is_passthrough(a.type)) continue;
      if (a.type == ActionType::OverlapFB) {
        record(r, i, ActionType::F, a.stage, a.microbatch);
        record(r, i, ActionType::B, a.sub_stage, a.sub_microbatch);
      } else {
        record(r, i, a.type, a.stage, a.microbatch);
      }
    }
  }

  void check_counts() {
    for (int s = 0; s < meta_.num_stages() && !full(); ++s) {
      const int owner = meta_.rank_of(s);
      for (int mb = 0; mb < meta_.num_microbatches && !full(); ++mb) {
        const Loc& f = index_.at(s, mb, detail::kF);
        const Loc& b = index_.at(s, mb, detail::kB);
        const Loc& i = index_.at(s, mb, detail::kI);
        const Loc& w = index_.at(s, mb, detail::kW);
        const std::string sm = "stage " + n2s(s) + " microbatch " + n2s(mb);
        if (!f.present())
          add("missing-forward", owner, -1, act(ActionType::F, s, mb),
              sm + " has no forward (expected " + act(ActionType::F, s, mb) + " on rank " +
                  n2s(owner) + ")");
        if (b.present() && (i.present() || w.present()))
          add("mixed-backward", b.rank, b.index, act(ActionType::B, s, mb),
              sm + " has both a full backward " + act(ActionType::B, s, mb) +
                  " and a split one (I/W)");
        else if (!b.present() && !i.present() && !w.present())
          add("missing-backward", owner, -1, act(ActionType::B, s, mb),
              sm + " has no backward (expected " + act(ActionType::B, s, mb) + ", or " +
                  act(ActionType::I, s, mb) + " and " + act(ActionType::W, s, mb) + ", on rank " +
                  n2s(owner) + ")");
        else if (i.present() && !w.present())
          add("missing-weight-grad", i.rank, i.index, act(ActionType::I, s, mb),
              sm + " has " + act(ActionType::I, s, mb) + " but no " + act(ActionType::W, s, mb));
        else if (w.present() && !i.present())
          add("w-without-i", w.rank, w.index, act(ActionType::W, s, mb),
              sm + " has " + act(ActionType::W, s, mb) + " but no " + act(ActionType::I, s, mb));
      }
    }
  }

  // Every SEND has exactly one RECV on the peer and vice versa.
  void check_comm_pairs() {
    const int S = meta_.num_stages();
    for (int s = 0; s + 1 < S && !full(); ++s) {
      if (!crosses_ranks(meta_, s)) continue;
      for (int mb = 0; mb < meta_.num_microbatches && !full(); ++mb) {
        pair_check(index_.at(s, mb, detail::kSendF), index_.at(s + 1, mb, detail::kRecvF),
                   act(ActionType::SendF, s, mb), act(ActionType::RecvF, s + 1, mb),
                   meta_.rank_of(s), meta_.rank_of(s + 1));
        pair_check(index_.at(s + 1, mb, detail::kSendB), index_.at(s, mb, detail::kRecvB),
                   act(ActionType::SendB, s + 1, mb), act(ActionType::RecvB, s, mb),
                   meta_.rank_of(s + 1), meta_.rank_of(s));
      }
    }
  }

  void pair_check(const Loc& send, const Loc& recv, const std::string& send_name,
                  const std::string& recv_name, int src, int dst) {
    if (send.present() && !recv.present())
      add("unmatched-send", send.rank, send.index, send_name,
          send_name + " on rank " + n2s(src) + " has no matching " + recv_name + " on rank " +
              n2s(dst));
    else if (!send.present() && recv.present())
      add("unmatched-recv", recv.rank, recv.index, recv_name,
          recv_name + " on rank " + n2s(dst) + " has no matching " + send_name + " on rank " +
              n2s(src));
    else if (!send.present() && !recv.present())
      add("missing-transfer", src, -1, send_name,
          "the boundary " + send_name + " -> " + recv_name + " between rank " + n2s(src) +
              " and rank " + n2s(dst) + " has neither a send nor a receive");
  }

  // `need` must be present on `rank` before `index`.
  void need_before(int rank, int index, const Loc& need, const std::string& need_name,
                   const std::string& code, const std::string& why) {
    if (need.present() && need.rank == rank && need.index < index) return;
    std::string where = need.present() && need.rank == rank
                            ? " (it is at index " + n2s(need.index) + ")"
                            : (need.present() ? " (it is on rank " + n2s(need.rank) + ")" : "");
    add_at(code, rank, index,
           "rank " + n2s(rank) + " index " + n2s(index) + ": " +
               to_string(plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)]) +
               " " + why + " " + need_name + " earlier on rank " + n2s(rank) + where);
  }

  void check_forward(int r, int i, int s, int mb) {
    if (s == 0) return;
    if (!crosses_ranks(meta_, s - 1))
      need_before(r, i, index_.at(s - 1, mb, detail::kF), act(ActionType::F, s - 1, mb),
                  "forward-before-input", "needs");
    else if (with_comms_)
      need_before(r, i, index_.at(s, mb, detail::kRecvF), act(ActionType::RecvF, s, mb),
                  "forward-before-input", "needs");
  }

  void check_backward(int r, int i, int s, int mb, ActionType t) {
    need_before(r, i, index_.at(s, mb, detail::kF), act(ActionType::F, s, mb),
                "backward-before-forward", "needs");
    if (s + 1 >= meta_.num_stages()) return;
    if (!crosses_ranks(meta_, s)) {
      const Loc& b = index_.at(s + 1, mb, detail::kB);
      const Loc& ii = index_.at(s + 1, mb, detail::kI);
      need_before(r, i, b.present() ? b : ii,
                  act(b.present() ? ActionType::B : ActionType::I, s + 1, mb),
                  "backward-before-grad", "needs");
    } else if (with_comms_) {
      need_before(r, i, index_.at(s, mb, detail::kRecvB), act(ActionType::RecvB, s, mb),
                  "backward-before-grad", "needs");
    }
    (void)t;
  }

  void check_order(int r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()) && !full(); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      const int s = a.stage, mb = a.microbatch;
      switch (a.type) {
        case ActionType::F: check_forward(r, i, s, mb); break;
        case ActionType::B:
        case ActionType::I: check_backward(r, i, s, mb, a.type); break;
        case ActionType::OverlapFB:
          check_forward(r, i, s, mb);
          check_backward(r, i, a.sub_stage, a.sub_microbatch, ActionType::B);
          break;
        case ActionType::W:
          need_before(r, i, index_.at(s, mb, detail::kI), act(ActionType::I, s, mb),
                      "w-before-i", "needs");
          break;
        case ActionType::SendF:
          need_before(r, i, index_.at(s, mb, detail::kF), act(ActionType::F, s, mb),
                      "send-before-producer", "sends the output of");
          break;
        case ActionType::SendB: {
          const Loc& b = index_.at(s, mb, detail::kB);
          const Loc& ii = index_.at(s, mb, detail::kI);
          need_before(r, i, b.present() ? b : ii,
                      act(b.present() || !ii.present() ? ActionType::B : ActionType::I, s, mb),
                      "send-before-producer", "sends the gradient of");
          break;
        }
        default: break;
      }
    }
  }

  const Plan& plan_;
  const PlanMeta& meta_;
  std::size_t max_;
  PlanIndex index_;
  bool with_comms_ = false;
  std::vector<Diagnostic> diags_;
};

}  // namespace

std::vector<Diagnostic> check_structure(const Plan& plan, std::size_t max_diagnostics) {
  if (!plan.is_whole()) {
    std::string held;
    for (int r : plan.rank_ids) held += (held.empty() ? "" : ", ") + n2s(r);
    return {{"partial-plan", -1, -1, "",
             "the plan holds rank(s) " + (held.empty() ? std::string("none") : held) + " of " +
                 n2s(plan.meta.pp_degree) + "; verification needs every rank 0.." +
                 n2s(plan.meta.pp_degree - 1)}};
  }
  return Checker(plan, max_diagnostics).run();
}

}  // namespace pipeplan
