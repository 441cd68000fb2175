// check_structure(): counts, ranges, placement and dependency order.
//
// Hot loops touch only the flat index; every message is built on the error
// path, so a clean plan costs a few table lookups per action.
#include <new>
#include <string>

#include "ir/deps.h"
#include "ir/hot.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/verify.h"
#include "verify/index.h"
#include "verify/memory_rules.h"

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

PlanIndex::PlanIndex(const PlanMeta& meta, std::size_t num_actions)
    : stages(meta.num_stages()),
      ends(meta),
      mbs(meta.num_microbatches),
      rank_of(static_cast<std::size_t>(meta.num_stages())),
      comm_count(static_cast<std::size_t>(meta.num_stages()) * 4, 0) {
  const std::size_t rows = static_cast<std::size_t>(stages) * static_cast<std::size_t>(mbs);
  if (rows <= num_actions + 4096) {
    const std::size_t n = rows * kNumSlots;
    cells_.reset(static_cast<std::int32_t*>(std::calloc(n > 0 ? n : 1, sizeof(std::int32_t))));
    if (!cells_) throw std::bad_alloc();
  }
  for (int s = 0; s < stages; ++s) rank_of[static_cast<std::size_t>(s)] = meta.rank_of(s);
}

}  // namespace detail

namespace {

using detail::Loc;
using detail::PlanIndex;
using detail::Slot;

std::string act(ActionType t, int s, int mb) { return to_string(make(t, s, mb)); }
using detail::n2s;

class Checker {
 public:
  Checker(const Plan& plan, std::size_t max, PlanIndex& index)
      : plan_(plan), meta_(plan.meta), max_(max), index_(index) {}

  // The scan also tries each action's order constraints against what it has
  // recorded so far (the rank's earlier actions). When all hold and counts
  // and pairs are clean, the full order pass (and its messages) is skipped.
  std::vector<Diagnostic> run() {
    for (std::size_t r = 0; r < plan_.ranks.size() && !full(); ++r) scan_rank(static_cast<int>(r));
    if (!diags_.empty()) return diags_;  // counts and order assume in-range actions
    if (!counts_and_pairs_clean()) {     // then word the diagnostics, in their order
      check_counts();
      if (with_comms_) check_comm_pairs();
    }
    if (diags_.empty() && !order_doubt_ && !(with_comms_ && comm_order_doubt_))
      return with_memory_order();
    for (std::size_t r = 0; r < plan_.ranks.size() && !full(); ++r)
      check_order(static_cast<int>(r));
    return with_memory_order();
  }

 private:
  bool full() const { return diags_.size() >= max_; }

  // The memory actions' order rules (verify/memory_rules.h), after the rest.
  std::vector<Diagnostic> with_memory_order() {
    for (Diagnostic& d : check_memory_order(plan_, index_, memory_, max_ - diags_.size()))
      diags_.push_back(std::move(d));
    return std::move(diags_);
  }

  // Places one OFFLOAD / RELOAD / RECOMPUTE (its order is checked last).
  void record_memory(int rank, int index, const Action& a) {
    const int s = a.stage, mb = a.microbatch;
    const std::string name = to_string(a);
    if (meta_.forward_only) {
      add("memory-action-in-forward-only", rank, index, name,
          "rank " + n2s(rank) + " index " + n2s(index) + ": " + name +
              " keeps activations for a backward, but the plan is forward-only (no backward "
              "keeps any)");
      return;
    }
    if (s < 0 || s >= index_.stages || mb < 0 || mb >= index_.mbs || rank_of(s) != rank ||
        !index_.ends.on_route(s, mb)) {
      report_bad(rank, index, a.type, s, mb);
      return;
    }
    const std::int32_t first = memory_.record(a, index);
    if (first >= 0)
      add("duplicate-action", rank, index, name,
          name + " appears twice: rank " + n2s(rank) + " index " + n2s(first) + " and rank " +
              n2s(rank) + " index " + n2s(index) +
              " (each memory action at most once per "
              "stage and microbatch)");
  }

  void add(std::string code, int rank, int index, std::string action, std::string message) {
    if (full()) return;
    diags_.push_back({std::move(code), rank, index, std::move(action), std::move(message)});
  }

  void add_at(const std::string& code, int rank, int index, const std::string& msg) {
    const Action& a = plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
    add(code, rank, index, to_string(a), msg);
  }

  int rank_of(int s) const { return index_.rank_of[static_cast<std::size_t>(s)]; }

  // Records one plain action (or one half of an overlap group); false when
  // it could not be recorded (a diagnostic says why).
  bool record(int rank, int index, ActionType t, int s, int mb) {
    const int S = index_.stages;
    const bool comm = is_comm(t);
    if (s < 0 || s >= S || mb < 0 || mb >= index_.mbs || rank_of(s) != rank ||
        !index_.ends.on_route(s, mb) || (comm && !comm_endpoint_ok(rank, t, s, mb))) {
      report_bad(rank, index, t, s, mb);
      return false;
    }
    const Slot k = detail::slot_of(t);
    const std::int32_t l = index_.raw(s, mb, k);
    if (l >= 0) {
      const std::string name = act(t, s, mb);
      add("duplicate-action", rank, index, name,
          name + " appears twice: rank " + n2s(rank_of(s)) + " index " + n2s(l) + " and rank " +
              n2s(rank) + " index " + n2s(index));
      if (comm) left_alone(rank, index, t, s, mb);
      return false;
    }
    index_.set(s, mb, k, index);
    if (comm) {
      with_comms_ = true;
      ++index_.comm_count[static_cast<std::size_t>(s) * 4 + detail::comm_slot(k)];
    }
    return true;
  }

  // A second copy of a SEND/RECV: one SEND meets one RECV, so one of the
  // two copies is left without its partner (and never completes).
  void left_alone(int rank, int index, ActionType t, int s, int mb) {
    const bool send = is_send(t);
    const int peer_s = deps::peer_stage(t, s);
    ActionType partner = ActionType::RecvF;
    if (t == ActionType::RecvF) partner = ActionType::SendF;
    else if (t == ActionType::SendB) partner = ActionType::RecvB;
    else if (t == ActionType::RecvB) partner = ActionType::SendB;
    const std::string name = act(t, s, mb), other = act(partner, peer_s, mb);
    add(send ? "unmatched-send" : "unmatched-recv", rank, index, name,
        "the second " + name + " (rank " + n2s(rank) + " index " + n2s(index) +
            ") is left without a partner: " + other + " on rank " + n2s(rank_of(peer_s)) +
            " meets only one " + (send ? "send" : "receive") + " of that value");
  }

  bool comm_endpoint_ok(int rank, ActionType t, int s, int mb) const {
    const int peer_stage = deps::peer_stage(t, s);
    return index_.ends.on_route(peer_stage, mb) && rank_of(peer_stage) != rank;
  }

  // " (microbatch M's route: stages A..B)" when the plan has routes.
  std::string route_note(int mb) const {
    if (!index_.ends.has_routes()) return {};
    return " of microbatch " + n2s(mb) + "'s route (stages " + n2s(index_.ends.first(mb)) + ".." +
           n2s(index_.ends.last(mb)) + ")";
  }

  // The diagnostic for an action record() refused (range, rank or peer).
  void report_bad(int rank, int index, ActionType t, int s, int mb) {
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
              n2s(meta_.num_microbatches) + " microbatches (0.." + n2s(meta_.num_microbatches - 1) +
              ")");
      return;
    }
    if (rank_of(s) != rank) {
      add("wrong-rank", rank, index, name,
          where + name + " runs on rank " + n2s(rank) + ", but stage " + n2s(s) +
              " belongs to rank " + n2s(rank_of(s)) + " (" + std::string(to_string(meta_.mapping)) +
              " mapping)");
      return;
    }
    if (!index_.ends.on_route(s, mb)) {
      add("off-route", rank, index, name,
          where + name + " runs stage " + n2s(s) + " for microbatch " + n2s(mb) +
              ", which does not cross it: its route is stages " + n2s(index_.ends.first(mb)) +
              ".." + n2s(index_.ends.last(mb)));
      return;
    }
    const int peer_stage = deps::peer_stage(t, s);
    if (!index_.ends.on_route(peer_stage, mb)) {
      add("bad-comm", rank, index, name,
          where + name + " has no peer: stage " + n2s(s) + " is the " +
              (peer_stage < s ? "first" : "last") + " stage" + route_note(mb));
      return;
    }
    add("bad-comm", rank, index, name,
        where + name + " is not needed: stages " + n2s(std::min(s, peer_stage)) + " and " +
            n2s(std::max(s, peer_stage)) + " are both on rank " + n2s(rank));
  }

  void scan_rank(int r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    bool marked = false;  // any BATCH_P2P mark: the groups get checked after the scan
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      marked |= a.batch_next || a.waited;
      if (is_passthrough(a.type)) continue;
      if (is_memory(a.type)) {
        record_memory(r, i, a);
        continue;
      }
      if (meta_.forward_only && owes_nothing_backward(a.type)) {
        add_at("backward-in-forward-only", r, i,
               "rank " + n2s(r) + " index " + n2s(i) + ": " + to_string(a) +
                   " is a backward action, but the plan is forward-only (F, SEND_F, RECV_F)");
        continue;
      }
      if (a.type == ActionType::OverlapFB) {
        const bool f = record(r, i, ActionType::F, a.stage, a.microbatch);
        const bool b = record(r, i, ActionType::B, a.sub_stage, a.sub_microbatch);
        if (f && b) {
          early_forward(r, i, a.stage, a.microbatch);
          early_backward(r, i, a.sub_stage, a.sub_microbatch);
        }
      } else if (record(r, i, a.type, a.stage, a.microbatch)) {
        early_order(r, i, a);
      }
    }
    if (marked) {
      index_.groups = true;
      check_groups(r);
    }
  }

  // Group marks the grammar cannot hold (a plan built in code).
  void check_groups(int r) {
    std::string why;
    const long at = first_bad_group(plan_.ranks[static_cast<std::size_t>(r)], &why);
    if (at >= 0)
      add_at("bad-group", r, static_cast<int>(at),
             "rank " + n2s(r) + " index " + n2s(at) + ": " + why);
  }

  // Types a forward-only plan must not hold.
  static bool owes_nothing_backward(ActionType t) {
    return t == ActionType::B || t == ActionType::I || t == ActionType::W ||
           t == ActionType::SendB || t == ActionType::RecvB || t == ActionType::OverlapFB;
  }

  // Whether slot k of (s, mb) is already recorded on rank r before index i
  // (forced inline: the scan calls it for every action).
  PIPEPLAN_HOT bool before(int r, int i, int s, int mb, Slot k) const {
    const std::int32_t at = index_.raw(s, mb, k);
    return at >= 0 && at < i && rank_of(s) == r;
  }

  // check_order's constraints on what is recorded so far; any doubt sends
  // the plan through the full pass, which words the diagnostics.
  void early_forward(int r, int i, int s, int mb) {
    if (s <= index_.ends.first(mb)) return;
    if (!index_.crosses(s - 1)) order_doubt_ |= !before(r, i, s - 1, mb, detail::kF);
    else comm_order_doubt_ |= !before(r, i, s, mb, detail::kRecvF);
  }
  void early_backward(int r, int i, int s, int mb) {
    order_doubt_ |= !before(r, i, s, mb, detail::kF);
    if (s >= index_.ends.last(mb)) return;
    if (!index_.crosses(s))
      order_doubt_ |= !before(r, i, s + 1, mb, detail::kB) && !before(r, i, s + 1, mb, detail::kI);
    else comm_order_doubt_ |= !before(r, i, s, mb, detail::kRecvB);
  }
  void early_order(int r, int i, const Action& a) {
    const int s = a.stage, mb = a.microbatch;
    switch (a.type) {
      case ActionType::F: early_forward(r, i, s, mb); break;
      case ActionType::B:
      case ActionType::I: early_backward(r, i, s, mb); break;
      case ActionType::W: order_doubt_ |= !before(r, i, s, mb, detail::kI); break;
      case ActionType::SendF: order_doubt_ |= !before(r, i, s, mb, detail::kF); break;
      case ActionType::SendB:
        order_doubt_ |= !before(r, i, s, mb, detail::kB) && !before(r, i, s, mb, detail::kI);
        break;
      default: break;
    }
  }

  // One sweep over the index: whether check_counts and check_comm_pairs
  // would both stay silent.
  bool counts_and_pairs_clean() const {
    const bool fwd_only = meta_.forward_only;
    const bool routed = index_.ends.has_routes();
    for (int s = 0; s < index_.stages; ++s) {
      const bool pairs = with_comms_ && s + 1 < index_.stages && index_.crosses(s);
      for (int mb = 0; mb < index_.mbs; ++mb) {
        if (routed && !index_.ends.on_route(s, mb)) continue;  // owes nothing there
        const std::int32_t* c = index_.row(s, mb);             // stored index + 1, 0 = absent
        const bool f = c[detail::kF] != 0, b = c[detail::kB] != 0, i = c[detail::kI] != 0,
                   w = c[detail::kW] != 0;
        if (!f || !(fwd_only ? !(b || i || w) : ((b && !i && !w) || (!b && i && w)))) return false;
        if (!pairs || (routed && s >= index_.ends.last(mb))) continue;
        const std::int32_t* n = index_.row(s + 1, mb);
        if ((c[detail::kSendF] != 0) != (n[detail::kRecvF] != 0) || c[detail::kSendF] == 0)
          return false;
        if (!fwd_only &&
            ((n[detail::kSendB] != 0) != (c[detail::kRecvB] != 0) || n[detail::kSendB] == 0))
          return false;
      }
    }
    return true;
  }

  void check_counts() {
    for (int s = 0; s < index_.stages && !full(); ++s) {
      for (int mb = 0; mb < index_.mbs && !full(); ++mb) {
        if (!index_.ends.on_route(s, mb)) continue;  // owes nothing there
        const bool f = index_.raw(s, mb, detail::kF) >= 0;
        const bool b = index_.raw(s, mb, detail::kB) >= 0;
        const bool i = index_.raw(s, mb, detail::kI) >= 0;
        const bool w = index_.raw(s, mb, detail::kW) >= 0;
        if (meta_.forward_only ? f : (f && ((b && !i && !w) || (!b && i && w))))
          continue;  // the common case (a forward-only plan records no backward)
        count_problem(s, mb);
      }
    }
  }

  void count_problem(int s, int mb) {
    const int owner = rank_of(s);
    const Loc f = index_.at(s, mb, detail::kF);
    const Loc b = index_.at(s, mb, detail::kB);
    const Loc i = index_.at(s, mb, detail::kI);
    const Loc w = index_.at(s, mb, detail::kW);
    const std::string sm = "stage " + n2s(s) + " microbatch " + n2s(mb);
    if (!f.present())
      add("missing-forward", owner, -1, act(ActionType::F, s, mb),
          sm + " has no forward (expected " + act(ActionType::F, s, mb) + " on rank " + n2s(owner) +
              ")");
    if (meta_.forward_only) return;
    if (b.present() && (i.present() || w.present()))
      add("mixed-backward", b.rank, b.index, act(ActionType::B, s, mb),
          sm + " has both a full backward " + act(ActionType::B, s, mb) + " and a split one (I/W)");
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

  // Every SEND has exactly one RECV on the peer and vice versa.
  void check_comm_pairs() {
    const int S = index_.stages;
    for (int s = 0; s + 1 < S && !full(); ++s) {
      if (!index_.crosses(s)) continue;
      for (int mb = 0; mb < index_.mbs && !full(); ++mb) {
        if (!index_.ends.on_route(s, mb) || !index_.ends.on_route(s + 1, mb)) continue;
        pair_check(s, mb, detail::kSendF, s + 1, detail::kRecvF, ActionType::SendF,
                   ActionType::RecvF);
        if (!meta_.forward_only)
          pair_check(s + 1, mb, detail::kSendB, s, detail::kRecvB, ActionType::SendB,
                     ActionType::RecvB);
      }
    }
  }

  void pair_check(int send_s, int mb, Slot send_k, int recv_s, Slot recv_k, ActionType send_t,
                  ActionType recv_t) {
    const bool has_send = index_.raw(send_s, mb, send_k) >= 0;
    const bool has_recv = index_.raw(recv_s, mb, recv_k) >= 0;
    if (has_send && has_recv) return;
    const Loc send = index_.at(send_s, mb, send_k);
    const Loc recv = index_.at(recv_s, mb, recv_k);
    const std::string send_name = act(send_t, send_s, mb), recv_name = act(recv_t, recv_s, mb);
    const int src = rank_of(send_s), dst = rank_of(recv_s);
    if (send.present() && !recv.present())
      add("unmatched-send", send.rank, send.index, send_name,
          send_name + " on rank " + n2s(src) + " has no matching " + recv_name + " on rank " +
              n2s(dst));
    else if (!send.present() && recv.present())
      add("unmatched-recv", recv.rank, recv.index, recv_name,
          recv_name + " on rank " + n2s(dst) + " has no matching " + send_name + " on rank " +
              n2s(src));
    else
      add("missing-transfer", src, -1, send_name,
          "the boundary " + send_name + " -> " + recv_name + " between rank " + n2s(src) +
              " and rank " + n2s(dst) + " has neither a send nor a receive");
  }

  // `need` (action need_t of need_s, mb) must be present on `rank` before
  // `index`; the message is built only when it is not.
  void need_before(int rank, int index, Slot need_k, ActionType need_t, int need_s, int mb,
                   const char* code, const char* why) {
    const std::int32_t at = index_.raw(need_s, mb, need_k);
    if (at >= 0 && at < index && rank_of(need_s) == rank) return;
    const Loc need = index_.at(need_s, mb, need_k);
    std::string where = need.present() && need.rank == rank
                            ? " (it is at index " + n2s(need.index) + ")"
                            : (need.present() ? " (it is on rank " + n2s(need.rank) + ")" : "");
    add_at(code, rank, index,
           "rank " + n2s(rank) + " index " + n2s(index) + ": " +
               to_string(
                   plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)]) +
               " " + why + " " + act(need_t, need_s, mb) + " earlier on rank " + n2s(rank) + where);
  }

  void check_forward(int r, int i, int s, int mb) {
    if (s <= index_.ends.first(mb)) return;
    if (!index_.crosses(s - 1))
      need_before(r, i, detail::kF, ActionType::F, s - 1, mb, "forward-before-input", "needs");
    else if (with_comms_)
      need_before(r, i, detail::kRecvF, ActionType::RecvF, s, mb, "forward-before-input", "needs");
  }

  void check_backward(int r, int i, int s, int mb) {
    need_before(r, i, detail::kF, ActionType::F, s, mb, "backward-before-forward", "needs");
    if (s >= index_.ends.last(mb)) return;
    if (!index_.crosses(s)) {
      const bool b = index_.raw(s + 1, mb, detail::kB) >= 0;
      need_before(r, i, b ? detail::kB : detail::kI, b ? ActionType::B : ActionType::I, s + 1, mb,
                  "backward-before-grad", "needs");
    } else if (with_comms_) {
      need_before(r, i, detail::kRecvB, ActionType::RecvB, s, mb, "backward-before-grad", "needs");
    }
  }

  void check_order(int r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()) && !full(); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      const int s = a.stage, mb = a.microbatch;
      switch (a.type) {
        case ActionType::F: check_forward(r, i, s, mb); break;
        case ActionType::B:
        case ActionType::I: check_backward(r, i, s, mb); break;
        case ActionType::OverlapFB:
          check_forward(r, i, s, mb);
          check_backward(r, i, a.sub_stage, a.sub_microbatch);
          break;
        case ActionType::W:
          need_before(r, i, detail::kI, ActionType::I, s, mb, "w-before-i", "needs");
          break;
        case ActionType::SendF:
          need_before(r, i, detail::kF, ActionType::F, s, mb, "send-before-producer",
                      "sends the output of");
          break;
        case ActionType::SendB: {
          const bool b = index_.raw(s, mb, detail::kB) >= 0;
          const bool ii = index_.raw(s, mb, detail::kI) >= 0;
          need_before(r, i, b ? detail::kB : detail::kI, b || !ii ? ActionType::B : ActionType::I,
                      s, mb, "send-before-producer", "sends the gradient of");
          break;
        }
        default: break;
      }
    }
  }

  const Plan& plan_;
  const PlanMeta& meta_;
  std::size_t max_;
  PlanIndex& index_;
  bool with_comms_ = false;  // any SEND/RECV recorded
  bool order_doubt_ = false, comm_order_doubt_ = false;
  detail::MemoryIndex memory_;  // OFFLOAD / RELOAD / RECOMPUTE, when the plan has any
  std::vector<Diagnostic> diags_;
};

}  // namespace

namespace detail {

void check_plan_limits(const Plan& plan) {
  const PlanMeta& m = plan.meta;
  if (m.pp_degree < 1 || m.stages_per_rank < 1 || m.num_microbatches < 1)
    throw InputError(
        "verify: pp_degree, stages_per_rank and num_microbatches must be at least 1 (got " +
        n2s(m.pp_degree) + ", " + n2s(m.stages_per_rank) + ", " + n2s(m.num_microbatches) + ")");
  if (std::string why = limits::shape_problem(m.pp_degree, m.stages_per_rank, m.num_microbatches);
      !why.empty())
    throw InputError("verify: " + why);
  if (plan.num_actions() > limits::kMaxActions)
    throw InputError("verify: " + n2s(static_cast<long long>(plan.num_actions())) +
                     " actions is more than the supported " +
                     n2s(static_cast<long long>(limits::kMaxActions)));
}

}  // namespace detail

namespace {

std::vector<Diagnostic> partial_plan(const Plan& plan) {
  std::string held;
  for (int r : plan.rank_ids) held += (held.empty() ? "" : ", ") + n2s(r);
  return {{"partial-plan", -1, -1, "",
           "the plan holds rank(s) " + (held.empty() ? std::string("none") : held) + " of " +
               n2s(plan.meta.pp_degree) + "; verification needs every rank 0.." +
               n2s(plan.meta.pp_degree - 1)}};
}

}  // namespace

namespace detail {

std::vector<Diagnostic> check_structure_indexed(const Plan& plan, std::size_t max_diagnostics,
                                                PlanIndex& index) {
  if (!plan.is_whole()) return partial_plan(plan);
  detail::check_plan_limits(plan);
  return Checker(plan, max_diagnostics, index).run();
}

}  // namespace detail

std::vector<Diagnostic> check_structure(const Plan& plan, std::size_t max_diagnostics) {
  if (!plan.is_whole()) return partial_plan(plan);
  detail::check_plan_limits(plan);
  PlanIndex index(plan.meta, plan.num_actions());
  return Checker(plan, max_diagnostics, index).run();
}

}  // namespace pipeplan
