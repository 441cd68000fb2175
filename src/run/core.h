// Internal: the execution core, the one place a plan is run. Every pass that
// runs a plan is a policy of it: the verifier's progress proof
// (verify/proof.h: ProofRun<M>, untimed, the model a constant), the
// simulator (sim/engine.h: Engine, timed), lowering's timing and latest
// starts (lower/timing.cc), the search's timing of orders (search/improve.cc)
// and the text timeline (emit/plan_timeline.cc); the last three through the
// compute-only model of run/values.h (ComputeOnly), whose value table the
// search's list scheduler and exact search, which decide orders rather than
// run one, read too.
//
// The loop: a worklist of ranks. A rank runs its program from its program
// counter until an action cannot run yet (Step::Wait: the rank sleeps until a
// hook wakes it), fails (Step::Halt: the rank stops for good) or the list
// ends. Each action goes to the hook of its role, deps::role() (ir/deps.h
// says what the action needs and makes; the core says how it runs):
//
//   enter(r, i, a)        every action, before its role: validation (the
//                         simulator checks an action when first reached)
//   compute(r, i, a)      Role::Compute: Wait until its inputs are there,
//                         then run it (unit steps, costs, or nothing to time)
//   transfer(r, i, a)     Role::Send / Role::Recv: post it, as a FIFO op on
//                         its pair end (post()) or under eager (post_eager())
//   bookkeeping(r, i, a)  Role::Bookkeeping (FSDP pass-through)
//   copy(r, i, a)         Role::Copy (OFFLOAD, RELOAD): Wait like compute()
//                         for what deps.h says it reads, then run it on the
//                         rank's copy stream (timed policies clock it on the
//                         rank's copy cursor, beside the compute cursor)
//   prefetch(list, i, n)  a cache hint for the rank's next actions
//   stalled()             when the worklist runs dry: a rank whose next action
//                         is run anyway (force; the timeline draws orders that
//                         cannot run), or -1 to stop
//
// The transport is the core's too: one matching of posted SEND/RECV under
// every model (docs/semantics.md), parameterised by the policy's op record
// (`Op`, with an `index` member: the action's place in its rank's list).
// Matching is by order on every model: the k-th send rank a posts to rank b
// (every stage boundary between them together) meets the k-th receive b
// posts from a. When a met pair completes is the model's:
//
//   rendezvous  a single SEND/RECV runs on the in-order stream of its rank
//               pair, a BATCH_P2P group as one unit on its rank's stream for
//               groups; a met pair completes once the units holding them are
//               both at the head of their streams; a unit ends when all its
//               operations completed
//   serial      as rendezvous, every unit of a rank (singles and groups) on
//               the rank's one stream
//   eager       a send completes when posted, a receive once its match was
//
// (the models' rows, pipeplan/transport.h: buffered_sends() is eager's,
// one_stream_per_rank() serial's). A runtime that waits where it posts
// (Waits::AtPost, use_groups(programs, true)) runs every single SEND/RECV as
// a group of one: the rank stays at it until it completed.
//
// Without groups a unit is one op and a pair's two ends advance together, so
// rendezvous and serial match stream heads position by position (the fast
// path: match_pair(), match_stream()); with groups (use_groups()) every
// posted op keeps a Link and units go on streams (match_units()).
//
//   meet(xe, x, ye, y)    a met pair (rendezvous, serial: when it completes;
//                         eager and with groups: when the later one is
//                         posted): true lets it complete; false stalls it
//                         for good (on the fast path: two sends or two
//                         receives at one position, which stall the pair)
//   complete(xe, x, ye, y, busy)  a met pair completes; `busy` is when the
//                         streams carrying it are free; returns when the
//                         transfer ends, which the units' streams wait for
//   on_sent(end, op)      eager: a SEND posted (it completes at once)
//   on_delivered(se, s, re, r)  eager: a RECV met its SEND (it completes)
//   on_waiting(end, op)   eager: an op posted before its match
//   group_ended(r, i, n)  the BATCH_P2P group of n members at index i ended:
//                         the rank goes on past it
//
// Policies choose, as compile-time constants, the worklist discipline
// (kOrder: a FIFO queue, a stack, or sweeps over the ranks in rank order,
// which keep each former loop's visiting order and so its diagnostics' order)
// and, with kBackward, a run from the ends of the lists towards their starts
// (latest starts). A hook a policy does not define is the core's default
// (compute and transfer always run; nothing forced). All of it is templates:
// each policy is compiled into its own loop with its hooks inlined, so the
// proof keeps its speed (docs/performance.md).
//
// Adding an action kind is its rules in ir/deps.h (deps::role, what it needs
// and makes) plus a hook here; no pass grows a loop of its own.
//
//  - Batched P2P groups, `(A;B;...)BATCH_P2P` (several SEND/RECV posted
//    together, completed together; Action::batch_next): deps::role() gives
//    Role::Group to a group's first member. With use_groups(), the core posts
//    every member through transfer() (each as the policy posts one), puts the
//    group on its stream as one unit, and keeps the rank at the group until
//    the unit ended (a rank passes a group only when it ended); then
//    group_ended() and the rank goes on after the last member. Without
//    use_groups() (policies that post nothing) the members run one by one.
//  - Memory actions (docs/memory.md): OFFLOAD(s,m) / RELOAD(s,m) are
//    Role::Copy, the copy() hook: they run on a per-rank copy stream that
//    overlaps compute, in list order, each after the computes before it in
//    the list; the proof runs them at once (they depend on their own rank
//    only). RECOMPUTE(s,m) is Role::Compute (it reads the kept input,
//    deps.h). Device memory is accounted by the simulator over its
//    timeline: freed when an OFFLOAD ends, taken when a RELOAD starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/deps.h"
#include "ir/hot.h"  // the hot path (posting, the proof's hooks) is forced inline
#include "pipeplan/ir.h"
#include "pipeplan/transport.h"
#include "run/state.h"

namespace pipeplan::run {

/// What a hook did with the action at a rank's program counter.
enum class Step : std::uint8_t {
  Next,  ///< done (ran, posted or passed): go on with the next action
  Wait,  ///< cannot run yet: the rank sleeps until woken
  Halt,  ///< cannot run ever (a bad action): the rank stops
};

/// The worklist discipline of a policy (which rank runs next).
enum class Order : std::uint8_t {
  Queue,  ///< first woken, first run (all ranks queued at the start, 0 first)
  Stack,  ///< last woken, first run (rank 0 first at the start)
  Sweep,  ///< ranks 0..n-1 in turn, each as far as it gets, until none moves
};

namespace detail {
template <class P, class = void>
struct Backward : std::false_type {};
template <class P>
struct Backward<P, std::void_t<decltype(P::kBackward)>> : std::bool_constant<P::kBackward> {};
// A policy may fix its transport model at compile time (kModel).
template <class P, class = void>
struct FixedModel : std::false_type {};
template <class P>
struct FixedModel<P, std::void_t<decltype(P::kModel)>> : std::true_type {};
}  // namespace detail

/// The core. `P` derives from Core<P, Op> and declares `static constexpr
/// Order kOrder` (`kBackward = true` runs lists from their ends; `kModel`
/// fixes the transport model, so that its branches fold away); its hooks
/// (above) may be private if it befriends the core.
template <class P, class Op = NoOp>
class Core : public State<Op> {
 public:
  /// Runs until no rank can move and stalled() forces none.
  void run() {
    for (;;) {
      if constexpr (P::kOrder == Order::Sweep) sweep();
      else drain();
      const int r = self().stalled();
      if (r < 0 || !step_once(r)) return;
    }
  }

  /// Queues `rank` to run again (once, however often it is woken).
  void wake(int rank) {
    auto& st = this->ranks_[static_cast<std::size_t>(rank)];
    if (st.queued || P::kOrder == Order::Sweep) return;
    st.queued = true;
    if constexpr (P::kOrder == Order::Stack) {
      stack_.push_back(rank);
    } else {
      std::size_t tail = head_ + queued_;
      if (tail >= ring_size_) tail -= ring_size_;
      ring_[tail] = rank;
      ++queued_;
    }
  }

  /// The transport model, a constant when the policy fixes it.
  Transport model() const {
    if constexpr (detail::FixedModel<P>::value) return P::kModel;
    else return this->model_;
  }

 protected:
  Core() = default;

  /// Sets the programs to run (forward runs start at each list's head,
  /// backward runs at its end); every rank is queued.
  void start(const std::vector<std::vector<Action>>& programs) {
    programs_ = &programs;
    const std::size_t n = programs.size();
    this->ranks_.assign(n, typename State<Op>::Rank{});
    if constexpr (detail::Backward<P>::value)
      for (std::size_t r = 0; r < n; ++r) this->ranks_[r].pc = programs[r].size();
    ring_.assign(n, 0);
    ring_size_ = n;
    head_ = queued_ = 0;
    stack_.clear();
    if constexpr (P::kOrder == Order::Stack) {
      for (int r = static_cast<int>(n) - 1; r >= 0; --r) wake(r);
    } else {
      for (int r = 0; r < static_cast<int>(n); ++r) wake(r);
    }
  }

  /// Posts `op` (a SEND when `send`) of `rank` on pair end `end` under the
  /// run's model and completes what can complete.
  void post(int rank, int end, const Op& op, bool send) {
    if (buffered_sends(model())) {
      post_eager(rank, end, op, send);
    } else if (this->groups()) {
      post_unit(rank, end, op, send);
    } else {
      End<Op>& e = this->ends_[static_cast<std::size_t>(end)];
      e.queue.push(op);
      ++e.posted;
      if (!one_stream_per_rank(model())) {
        match_pair(static_cast<unsigned>(end) >> 1);
      } else {
        this->streams_[static_cast<std::size_t>(rank)].ends.push(end);
        match_stream(rank);
      }
    }
  }

  // Default hooks (a policy's own hide them).
  Step enter(int, std::size_t, const Action&) { return Step::Next; }
  Step compute(int, std::size_t, const Action&) { return Step::Next; }
  Step transfer(int, std::size_t, const Action&) { return Step::Next; }
  Step bookkeeping(int, std::size_t, const Action&) { return Step::Next; }
  Step copy(int, std::size_t, const Action&) { return Step::Next; }
  void prefetch(const Action*, std::size_t, std::size_t) const {}
  int stalled() { return -1; }
  bool meet(int, const Op&, int, const Op&) { return true; }
  double complete(int, const Op&, int, const Op&, double busy) { return busy; }
  void on_sent(int, const Op&) {}
  void on_delivered(int, const Op&, int, const Op&) {}
  void on_waiting(int, const Op&) {}
  void group_ended(int, std::size_t, std::size_t) {}

 private:
  P& self() { return static_cast<P&>(*this); }

  Step dispatch(int r, std::size_t i, const Action& a) {
    P& p = self();
    const Step s = p.enter(r, i, a);
    if (s != Step::Next) return s;
    switch (deps::role(a)) {
      case deps::Role::Compute: return p.compute(r, i, a);
      case deps::Role::Group:
        if (this->groups() && !detail::Backward<P>::value) return group(r, i);
        return p.transfer(r, i, a);  // a policy that posts nothing: member by member
      case deps::Role::Send:
      case deps::Role::Recv:
        // Waited where it stands (Waits::AtPost): a unit of one, as a group.
        if (this->waits_singles() && !detail::Backward<P>::value) return group(r, i);
        return p.transfer(r, i, a);
      case deps::Role::Copy: return p.copy(r, i, a);
      default: return p.bookkeeping(r, i, a);
    }
  }

  // Runs rank r as far as it goes; whether it moved.
  bool advance(int r) {
    auto& st = this->ranks_[static_cast<std::size_t>(r)];
    if (st.halted) return false;
    const std::vector<Action>& list = (*programs_)[static_cast<std::size_t>(r)];
    const std::size_t from = st.pc;
    if constexpr (detail::Backward<P>::value) {
      while (st.pc > 0) {
        const std::size_t i = st.pc - 1;
        const Step s = dispatch(r, i, list[i]);
        if (s != Step::Next) {
          st.halted = s == Step::Halt;
          break;
        }
        st.pc = i;
      }
    } else {
      const Action* const first = list.data();
      const std::size_t n = list.size();  // the programs stay as they are during a run
      while (st.pc < n) {
        self().prefetch(first, st.pc, n);
        const Step s = dispatch(r, st.pc, first[st.pc]);
        if (s != Step::Next) {
          st.halted = s == Step::Halt;
          break;
        }
        ++st.pc;
      }
    }
    return st.pc != from;
  }

  // Runs rank r's next action whatever it waits for (stalled() chose it);
  // whether it ran (a policy that forces nothing stops the run).
  bool step_once(int r) {
    auto& st = this->ranks_[static_cast<std::size_t>(r)];
    const std::vector<Action>& list = (*programs_)[static_cast<std::size_t>(r)];
    if constexpr (detail::Backward<P>::value) {
      if (st.pc == 0 || dispatch(r, st.pc - 1, list[st.pc - 1]) != Step::Next) return false;
      --st.pc;
    } else {
      if (st.pc >= list.size() || dispatch(r, st.pc, list[st.pc]) != Step::Next) return false;
      ++st.pc;
    }
    return true;
  }

  // Queue and Stack: serial stream heads first, then ranks, until both are dry.
  void drain() {
    for (;;) {
      if (!stream_work_.empty()) {
        const int r = stream_work_.back();
        stream_work_.pop_back();
        match_stream(r);
        continue;
      }
      int r;
      if constexpr (P::kOrder == Order::Stack) {
        if (stack_.empty()) return;
        r = stack_.back();
        stack_.pop_back();
      } else {
        if (queued_ == 0) return;
        r = ring_[head_];
        if (++head_ == ring_size_) head_ = 0;
        --queued_;
      }
      this->ranks_[static_cast<std::size_t>(r)].queued = false;
      advance(r);
    }
  }

  void sweep() {
    bool moved = true;
    while (moved) {
      moved = false;
      for (int r = 0; r < this->num_ranks(); ++r) moved = advance(r) || moved;
    }
  }

  // Rendezvous: a pair completes position after position while both ends
  // posted it and meet() accepts it, one transfer at a time.
  void match_pair(unsigned pair) {
    Pair& p = this->pairs_[pair];
    const int xe = static_cast<int>(2 * pair), ye = xe + 1;
    End<Op>& a = this->ends_[static_cast<std::size_t>(xe)];
    End<Op>& b = this->ends_[static_cast<std::size_t>(ye)];
    while (!p.broken && !a.queue.empty() && !b.queue.empty()) {
      const Op& x = a.queue.front();
      const Op& y = b.queue.front();
      if (!self().meet(xe, x, ye, y)) {
        p.broken = true;
        return;
      }
      p.busy_until = self().complete(xe, x, ye, y, p.busy_until);
      finish(a);
      finish(b);
    }
  }

  // Serial: a rank's stream head completes when it is its partner's stream
  // head too. Pair ends match in posting order, so both partners are at the
  // front of their ends' queues. The partner's stream moved too: its next
  // head is tried from stream_work_.
  void match_stream(int rank) {
    Stream& mine = this->streams_[static_cast<std::size_t>(rank)];
    while (!mine.ends.empty()) {
      const int xe = mine.ends.front(), ye = xe ^ 1;
      End<Op>& ex = this->ends_[static_cast<std::size_t>(xe)];
      End<Op>& ey = this->ends_[static_cast<std::size_t>(ye)];
      Pair& p = this->pairs_[static_cast<unsigned>(xe) >> 1];
      if (p.broken || ey.queue.empty()) return;
      Stream& other = this->streams_[static_cast<std::size_t>(ey.rank)];
      if (other.ends.empty() || other.ends.front() != ye) return;
      const Op& x = ex.queue.front();
      const Op& y = ey.queue.front();
      if (!self().meet(xe, x, ye, y)) {
        p.broken = true;
        return;
      }
      const double busy = mine.busy_until > other.busy_until ? mine.busy_until : other.busy_until;
      mine.busy_until = other.busy_until = self().complete(xe, x, ye, y, busy);
      finish(ex);
      finish(ey);
      mine.ends.pop();
      other.ends.pop();
      stream_work_.push_back(ey.rank);
    }
  }

  // ---- eager: sends complete when posted, receives once met ----

  void post_eager(int rank, int end, const Op& op, bool send) {
    End<Op>& mine = this->ends_[static_cast<std::size_t>(end)];
    ++mine.posted;
    if (!send) ++mine.recvs;
    if (this->groups()) note_posted(rank, end, op);
    End<Op>& ch = this->ends_[static_cast<std::size_t>(send ? end : end ^ 1)];
    if (send) {
      self().on_sent(end, op);
      if (this->groups()) member_done(rank, op.index, 0.0);
    }
    if (ch.unmatched.empty() || ch.unmatched_recvs != send) {
      ch.unmatched.push(op);
      ch.unmatched_recvs = !send;
      self().on_waiting(end, op);
      return;
    }
    const Op other = ch.unmatched.front();
    ch.unmatched.pop();
    const int oe = end ^ 1;
    if (send) deliver(end, op, oe, other, true);
    else deliver(oe, other, end, op, false);  // the receiving rank is the one running
  }

  // Eager: a met pair; the receive completes unless meet() refuses it, and
  // wakes its rank when it was waiting.
  void deliver(int se, const Op& s, int re, const Op& r, bool waiting) {
    if (!self().meet(se, s, re, r)) return;
    End<Op>& e = this->ends_[static_cast<std::size_t>(re)];
    ++e.recvs_done;
    ++e.done;
    e.last_done = r.index;
    if (this->groups()) {
      link_met(se, s, re, r);
      member_done(e.rank, r.index, 0.0);
    }
    self().on_delivered(se, s, re, r);
    if (waiting) wake(e.rank);
  }

  // ---- with groups: units on streams (rendezvous, serial; run/core_groups.h) ----
  PIPEPLAN_COLD void note_posted(int rank, int end, const Op& op);
  PIPEPLAN_COLD void link_met(int xe, const Op& x, int ye, const Op& y);
  Link<Op>& link_of(int rank, std::int32_t index) {
    return this->links_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
  }
  PIPEPLAN_COLD void member_done(int rank, std::int32_t index, double t);
  PIPEPLAN_COLD void post_unit(int rank, int end, const Op& op, bool send);
  void push_unit(int rank, std::int32_t unit, std::size_t stream);
  void match_unit(int r, std::int32_t u);
  void complete_met(int r, std::int32_t j);
  PIPEPLAN_COLD Step group(int r, std::size_t i);

  static void finish(End<Op>& e) {
    e.last_done = e.queue.front().index;
    e.queue.pop();
    ++e.done;
  }

  const std::vector<std::vector<Action>>* programs_ = nullptr;
  std::vector<int> ring_;  // Queue: ranks queued, from head_
  std::size_t ring_size_ = 0, head_ = 0, queued_ = 0;
  std::vector<int> stack_;        // Stack
  std::vector<int> stream_work_;  // serial: ranks whose stream head may now match
  std::vector<std::pair<int, std::int32_t>> unit_work_;  // with groups: units now at a head
  std::int32_t group_unit_ = -1;  // with groups: the group whose members are being posted
};

}  // namespace pipeplan::run

#include "run/core_groups.h"  // the group paths' definitions
