// Internal: the progress proof, verify()'s run of a structurally valid plan
// under one transport model on the execution core (src/run/core.h), and the
// reports that name what is stuck when it does not finish.
//
// The proof keeps counters, not per-operation records: every pair end posts
// its operations in program order and, under the FIFO models, completes them
// in that order too, so "posted" and "done" of an end are two counters, and
// the operation at end position k pairs with position k of the reverse end.
// Memory: 8 bytes per (stage, microbatch) beside the shared index and the
// short queues of posted, unmatched operations. Reports (failure only)
// rebuild per-operation detail from those counters (4 bytes per SEND/RECV).
//
// Proof holds the layout, the hooks' records and the reports; ProofRun<M> is
// the core's policy for model M (a constant, so the loop carries no test of
// the model: the proof's speed, docs/performance.md).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/diagnostic.h"
#include "pipeplan/ir.h"
#include "pipeplan/verify.h"
#include "run/core.h"
#include "verify/index.h"
#include "verify/payload.h"

namespace pipeplan::detail {

/// A posted SEND/RECV: its index in its rank's list, and its tag: the value
/// it carries (2 * sending key + gradient) * 2 + 1 for a send, so two ops
/// are a send and a receive of one value when their tags differ in bit 0
/// only (kMaxStageMicrobatches keeps it in 32 bits).
struct ProofOp {
  std::int32_t index = -1;
  std::uint32_t tag = 0;
};
using ProofState = run::State<ProofOp>;

class Proof {
 public:
  /// After the run of `core` (the ProofRun this is part of): appends why the
  /// plan does not progress, if it does not.
  void conclude(std::vector<Diagnostic>& out);

 protected:
  // A SEND/RECV named by its place in the plan (failure reports only).
  struct OpRef {
    int rank = -1, index = -1;
    bool valid() const { return rank >= 0; }
    bool operator==(const OpRef& o) const { return rank == o.rank && index == o.index; }
    bool operator!=(const OpRef& o) const { return !(*this == o); }
  };
  // A rank's last few posted receives: (stage, mb, end position, grad).
  struct RecentRecv {
    std::int32_t stage = -1, mb = -1, pos = 0;
    bool grad = false;
  };
  static constexpr std::size_t kRecent = 4;

  /// `index`: the dense index check_structure_indexed() built for `plan`;
  /// `core`: the run's state, which this connects to the plan's layout.
  /// `rules`: the runtime's additions to the model (Waits::AtPost runs
  /// singles as groups of one; groups_apart asks for group_single_check).
  Proof(const Plan& plan, const PlanIndex& index, ProofState& core, Transport model,
        const RunRules& rules);

  // ---- layout (progress.cc) ----
  int comm_end(const Action& a) const {
    const auto s = static_cast<std::size_t>(a.stage);
    return deps::peer_stage(a) > a.stage ? down_[s] : up_[s];
  }
  std::size_t key(int s, int mb) const {
    return static_cast<std::size_t>(s) * mbs_ + static_cast<std::size_t>(mb);
  }
  // The value a SEND/RECV carries, named by its sending stage (`peer`: its
  // peer stage, deps::peer_stage(a)).
  std::size_t value_of(const Action& a, int peer) const {
    const bool grad = a.type == ActionType::SendB || a.type == ActionType::RecvB;
    const int send_stage = is_send(a.type) ? a.stage : peer;
    return 2 * key(send_stage, a.microbatch) + (grad ? 1 : 0);
  }
  std::size_t value_of(const Action& a) const { return value_of(a, deps::peer_stage(a)); }
  const Action& action(int rank, int index) const {
    return plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  const Action& action(OpRef o) const { return action(o.rank, o.index); }
  std::string act(OpRef o) const { return to_string(action(o)); }
  int count(int e) const {
    const auto u = static_cast<std::size_t>(e);
    return static_cast<int>(end_last_[u] - end_first_[u]);
  }
  OpRef op_at(int e, int pos) const {
    return {core_.end(e).rank,
            idx_[end_first_[static_cast<std::size_t>(e)] + static_cast<std::size_t>(pos)]};
  }

  // ---- what the hooks and the reports both ask (forced inline: in the
  // proof's loop the model is a constant, so its branches fold away) ----
  PIPEPLAN_HOT bool recv_done(const ProofState& core, Transport model, int r, bool grad, int s,
                              int mb) const;
  PIPEPLAN_HOT OpRef blocking_recv(const ProofState& core, Transport model, int r,
                                   const Action& a) const;
  bool all_done() const;

  // ---- failure reports (progress_report.cc) ----
  void fill_ends();
  std::vector<int> pairs_in_rank_order() const;
  void fifo_check(std::vector<Diagnostic>& out) const;
  void group_single_check(std::vector<Diagnostic>& out) const;
  void report_corruption(std::vector<Diagnostic>& out) const;
  int pair_pos(OpRef o) const;
  bool posted(OpRef o) const;
  int seq_of(OpRef o) const;
  OpRef match_of(OpRef o) const;
  std::string why_units(OpRef id, int& waits_for) const;
  bool done(OpRef o) const;
  OpRef partner(OpRef o) const;
  OpRef head_of(OpRef o) const;
  int next_comm(int r, int i) const;
  int peer_of(OpRef o) const;
  std::string pair_name(OpRef o) const;
  bool pending(int r) const;
  OpRef first_pending(int r) const;
  std::string why(OpRef id, int& waits_for) const;
  // Per rank, for the waiting chain: where it stands, whom it waits for
  // (-1: no one), and the root cause when no one.
  struct Chain {
    std::vector<int> waits;
    std::vector<std::string> at, roots;
  };
  std::vector<int> report_stuck(std::vector<Diagnostic>& out, Chain& chain) const;
  std::string waiting_chain(const Chain& chain, int first) const;
  void report(std::vector<Diagnostic>& out) const;

  const Plan& plan_;
  const PlanIndex& index_;
  const ProofState& core_;
  int n_;
  std::size_t mbs_;                                // index_.mbs, read by every key()
  std::vector<int> up_, down_;                     // per stage: end towards stage-1 / stage+1
  std::vector<std::vector<int>> ends_of_;          // rank -> its ends
  std::vector<std::size_t> end_first_, end_last_;  // per end: its range in idx_
  std::vector<std::int32_t> idx_;                  // action indices, end by end (reports)
  std::vector<std::int32_t> seq_;  // parallel to idx_: the op's place among its end's sends
                                   // (a send) or receives (a receive): its match by order
  RunRules rules_;
  bool corrupt_any_ = false;              // a met pair whose payloads differ
  std::vector<std::uint64_t> delivered_;  // eager: a mark per value whose receive completed
  int receiver_ = 0;                      // the receiving rank of the ops meet() accepted
  std::vector<std::array<RecentRecv, kRecent>> recent_;
  std::vector<std::uint32_t> recent_next_;
};

/// The proof under model M: the core's policy (hooks below).
template <Transport M>
class ProofRun final : public run::Core<ProofRun<M>, ProofOp>, public Proof {
 public:
  static constexpr run::Order kOrder = run::Order::Queue;
  static constexpr Transport kModel = M;

  ProofRun(const Plan& plan, const PlanIndex& index, const RunRules& rules)
      : Proof(plan, index, static_cast<ProofState&>(*this), M, rules) {}
  /// Runs the proof; appends why the plan does not progress, if it does not.
  void prove(std::vector<Diagnostic>& out) {
    this->start(plan_.ranks);
    this->run();
    conclude(out);
  }

 private:
  friend class run::Core<ProofRun<M>, ProofOp>;
  using Core = run::Core<ProofRun<M>, ProofOp>;

  // Ranks take turns every few actions, so the hardware does not see a
  // stream: fetch this rank's next lines ahead of time.
  void prefetch(const Action* list, std::size_t i, std::size_t n) const {
    detail::prefetch(list + std::min(i + kPrefetchAhead, n - 1));
  }
  run::Step compute(int r, std::size_t, const Action& a) {
    return blocking_recv(*this, M, r, a).valid() ? run::Step::Wait : run::Step::Next;
  }
  PIPEPLAN_HOT run::Step transfer(int r, std::size_t i, const Action& a) {
    const int peer = deps::peer_stage(a);
    const auto s = static_cast<std::size_t>(a.stage);
    const int e = peer > a.stage ? down_[s] : up_[s];  // comm_end(a)
    const auto ru = static_cast<std::size_t>(r);
    // A receive's place among its end's operations, which the end's
    // completion count is compared with (FIFO models).
    if (!buffered_sends(M) && is_recv(a.type))
      recent_[ru][recent_next_[ru]++ % kRecent] = {a.stage, a.microbatch, this->end(e).posted,
                                                   a.type == ActionType::RecvB};
    const bool send = is_send(a.type);
    this->post(r, e,
               ProofOp{static_cast<std::int32_t>(i),
                       static_cast<std::uint32_t>(2 * value_of(a, peer) + (send ? 1 : 0))},
               send);
    return run::Step::Next;
  }
  // A met pair completes when one sends and the other receives (only stream
  // heads without groups can be two sends or two receives); a payload
  // mismatch still completes, and is noted (corruption, reported by order).
  bool meet(int xe, const ProofOp& x, int ye, const ProofOp& y) {
    const std::uint32_t diff = x.tag ^ y.tag;
    if (!(diff & 1u)) return false;
    if (diff != 1u) corrupt_any_ = true;
    receiver_ = this->end((x.tag & 1u) ? ye : xe).rank;
    return true;
  }
  double complete(int, const ProofOp&, int, const ProofOp&, double) {
    this->wake(receiver_);  // with groups the core wakes both ranks itself
    return 0.0;
  }
  // Eager: the receive of value tag / 2 completed.
  void on_delivered(int, const ProofOp&, int, const ProofOp& r) {
    const std::uint32_t v = r.tag >> 1;
    delivered_[v / 64] |= std::uint64_t{1} << (v % 64);
  }
};

// ---- what the hooks and the reports both ask (inline: the hot path) ----

// Whether the receive of direction `grad` into (s, mb) on rank r is done.
// Eager: its value's mark. With groups: its link. FIFO models: an end
// completes in program order, so the receive at end position k is done
// once k < done; k comes from the rank's last few receives (a receive sits
// right before its consumer in lowered plans), else from the index.
PIPEPLAN_HOT bool Proof::recv_done(const ProofState& core, Transport model, int r, bool grad, int s,
                                   int mb) const {
  if (buffered_sends(model)) {  // one mark per value whose receive completed
    const std::size_t v = 2 * key(grad ? s + 1 : s - 1, mb) + (grad ? 1 : 0);
    return (delivered_[v / 64] >> (v % 64)) & 1u;
  }
  const auto& e =
      core.end(grad ? down_[static_cast<std::size_t>(s)] : up_[static_cast<std::size_t>(s)]);
  if (core.groups()) {
    const std::int32_t j = index_.raw(s, mb, grad ? kRecvB : kRecvF);
    return core.link(r, j).done;
  }
  for (const RecentRecv& x : recent_[static_cast<std::size_t>(r)])
    if (x.stage == s && x.mb == mb && x.grad == grad) return e.done > x.pos;
  const std::int32_t j = index_.raw(s, mb, grad ? kRecvB : kRecvF);
  return e.last_done >= j;  // in program order
}

// The receive a compute action still waits for, or an invalid ref.
PIPEPLAN_HOT Proof::OpRef Proof::blocking_recv(const ProofState& core, Transport model, int r,
                                               const Action& a) const {
  OpRef w;
  auto fwd = [&](int s, int mb) PIPEPLAN_HOT_LAMBDA {
    if (w.valid() || s <= 0 || up_[static_cast<std::size_t>(s)] < 0) return;
    if (!recv_done(core, model, r, false, s, mb)) w = {r, index_.raw(s, mb, kRecvF)};
  };
  auto bwd = [&](int s, int mb) PIPEPLAN_HOT_LAMBDA {
    if (w.valid() || down_[static_cast<std::size_t>(s)] < 0) return;
    if (!recv_done(core, model, r, true, s, mb)) w = {r, index_.raw(s, mb, kRecvB)};
  };
  deps::for_each_input(a, index_.ends, [&](const deps::Value& v, int s) PIPEPLAN_HOT_LAMBDA {
    if (v.stage == s) return;  // kept on this stage: no receive
    if (v.kind == deps::Kind::Forward) fwd(s, v.microbatch);
    else bwd(s, v.microbatch);
  });
  return w;
}

}  // namespace pipeplan::detail
