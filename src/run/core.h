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
//   prefetch(list, i, n)  a cache hint for the rank's next actions
//   stalled()             when the worklist runs dry: a rank whose next action
//                         is run anyway (force; the timeline draws orders that
//                         cannot run), or -1 to stop
//
// The transport is the core's too: one matching of posted SEND/RECV under
// every model (docs/semantics.md), parameterised by the policy's op record
// (`Op`, with an `index` member: the action's place in its rank's list):
//
//   meet(xe, x, ye, y)    two ops at the same position of a pair (rendezvous:
//                         the pair's heads; serial: both ranks' stream heads):
//                         true completes them; false stalls the pair for good
//                         (two sends, two receives, or a send meeting another
//                         value's receive where the policy treats it so)
//   complete(xe, x, ye, y, busy)  they complete; `busy` is when the stream
//                         carrying them is free; returns when the transfer
//                         ends, which the stream is busy until
//   on_sent / on_delivered / on_waiting(end, op)   eager: a SEND posted (it
//                         completes at once), a RECV whose send was posted
//                         (it completes), a RECV waiting for its send
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
// and makes) plus a hook here; no pass grows a loop of its own. The two
// kinds planned next fit as follows:
//
//  - Batched P2P groups, `(A;B;...)BATCH_P2P` (several SEND/RECV posted
//    together, completed together): deps::role() gives Role::Group and
//    deps.h lists a group's members. The core sends Role::Group to one more
//    hook, group(r, i, a), which posts every member the way transfer() posts
//    one, tagged with the group's unit, and returns Step::Wait until the
//    unit completed (a rank passes a group only when it ended); the unit's
//    last completion wakes the rank, as a completed RECV does. The matching
//    generalises from ops to units on streams: today a Stream holds a rank's
//    unmatched ops in order (serial) and each pair end holds its own. Under
//    rendezvous a group becomes one unit on the rank's stream for groups
//    while single ops stay on their pair end's in-order queue; under serial
//    every unit, single or group, is on the rank's one stream (a single op
//    is today's unit of one). A unit completes when each member is at the
//    front of its pair end and its partner is the front of the partner's
//    stream (match_stream() unit by unit); meet() and complete() still see
//    each met pair. Matching stays by order on every model (the k-th send
//    a->b meets the k-th receive b posts from a), so a met pair of
//    different values is corruption under every model, eager included:
//    under eager, sends complete when posted and a receive when the k-th
//    send of its direction was posted (End keeps its posted sends and
//    receives apart for that), and post_eager() hands meet() the pair.
//  - Memory actions: OFFLOAD(s,m) / RELOAD(s,m) are Role::Copy, run on a
//    per-rank copy stream that overlaps compute: a hook copy(r, i, a) that
//    Waits like compute() for what deps.h says the copy needs (the
//    activation exists; a RELOAD after its OFFLOAD ended) and that timed
//    policies clock on the rank's copy cursor instead of its compute
//    cursor; the proof runs it at once (it depends on its own rank only).
//    RECOMPUTE(s,m) is Role::Compute, its inputs from deps.h (before the
//    backward that reads it). Device memory is accounted in the timed
//    policies' compute and copy hooks: freed when an OFFLOAD ends, taken
//    when a RELOAD starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/deps.h"
#include "pipeplan/ir.h"
#include "pipeplan/transport.h"
#include "run/fifo.h"

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

/// A rank pair that a stage boundary joins; its ends are ends()[2 * id]
/// (the lower rank's) and ends()[2 * id + 1].
struct Pair {
  int lo = 0, hi = 0;
  double busy_until = 0.0;  ///< rendezvous: when the pair's stream is free
  bool broken = false;      ///< meet() refused a position: nothing more completes
};

/// One end of a pair: what its rank posted towards the other end, in order.
template <class Op>
struct End {
  int rank = 0;
  int posted = 0, done = 0;     ///< ops ever posted / completed (FIFO models)
  std::int32_t last_done = -1;  ///< action index of the last completed op
  Fifo<Op> queue;               ///< FIFO models: posted, not completed yet
};

/// Serial model: a rank's one in-order stream over all its pair ends.
struct Stream {
  Fifo<int> ends;           ///< the end of every op posted and not completed
  double busy_until = 0.0;  ///< when the stream is free
};

/// The op record of a policy that posts nothing.
struct NoOp {
  std::int32_t index = -1;
};

/// What a run leaves behind, readable without the policy's type (reports
/// are written against this): program counters and the transport's state.
template <class Op>
class State {
 public:
  /// The rank's program counter: forward runs have passed every action
  /// before it; backward runs have settled every action from it on.
  std::size_t pc(int rank) const { return ranks_[static_cast<std::size_t>(rank)].pc; }
  /// Forward runs: whether the rank passed (posted or ran) action `index`.
  bool passed(int rank, int index) const {
    return index >= 0 && static_cast<std::size_t>(index) < pc(rank);
  }
  bool halted(int rank) const { return ranks_[static_cast<std::size_t>(rank)].halted; }
  int num_ranks() const { return static_cast<int>(ranks_.size()); }

  Transport model() const { return model_; }
  const std::vector<Pair>& pairs() const { return pairs_; }
  const std::vector<End<Op>>& ends() const { return ends_; }
  const End<Op>& end(int e) const { return ends_[static_cast<std::size_t>(e)]; }
  const Stream& stream(int rank) const { return streams_[static_cast<std::size_t>(rank)]; }
  /// The end through which `rank` talks across boundary b (stages b, b+1);
  /// -1 when the boundary stays on one rank.
  int end_of(int boundary, int rank) const {
    const int pair = boundary_pair_[static_cast<std::size_t>(boundary)];
    if (pair < 0) return -1;
    return 2 * pair + (rank == pairs_[static_cast<std::size_t>(pair)].lo ? 0 : 1);
  }
  /// Eager: whether the send of value `v` was posted.
  bool sent(std::size_t v) const { return (sent_[v / 64] >> (v % 64)) & 1u; }

  /// Builds the pairs of `meta`'s stage layout (one per pair of ranks some
  /// boundary joins, in boundary order) for transfers under `model`;
  /// `eager_values` sizes the eager model's sent-value marks.
  void connect(const PlanMeta& meta, Transport model, std::size_t eager_values = 0) {
    model_ = model;
    const int stages = meta.num_stages(), n = meta.pp_degree;
    boundary_pair_.assign(static_cast<std::size_t>(stages > 1 ? stages - 1 : 0), -1);
    std::vector<std::vector<std::pair<int, int>>> by_lo(static_cast<std::size_t>(n));
    for (int b = 0; b + 1 < stages; ++b) {
      const int x = meta.rank_of(b), y = meta.rank_of(b + 1);
      if (x == y) continue;
      const int lo = x < y ? x : y, hi = x < y ? y : x;
      int id = -1;
      for (const auto& [peer, pid] : by_lo[static_cast<std::size_t>(lo)])
        if (peer == hi) id = pid;
      if (id < 0) {
        id = static_cast<int>(pairs_.size());
        pairs_.push_back(Pair{lo, hi});
        by_lo[static_cast<std::size_t>(lo)].push_back({hi, id});
      }
      boundary_pair_[static_cast<std::size_t>(b)] = id;
    }
    ends_.resize(2 * pairs_.size());
    for (std::size_t p = 0; p < pairs_.size(); ++p) {
      ends_[2 * p].rank = pairs_[p].lo;
      ends_[2 * p + 1].rank = pairs_[p].hi;
    }
    streams_.assign(static_cast<std::size_t>(n), Stream{});
    sent_.assign(model == Transport::Eager ? (eager_values + 63) / 64 : 0, 0);
  }

 protected:
  struct Rank {
    std::size_t pc = 0;
    bool queued = false, halted = false;
  };

  std::vector<Rank> ranks_;
  Transport model_ = Transport::Rendezvous;
  std::vector<int> boundary_pair_;  // boundary b (stages b, b+1) -> pair id, -1 on one rank
  std::vector<Pair> pairs_;
  std::vector<End<Op>> ends_;
  std::vector<Stream> streams_;
  std::vector<std::uint64_t> sent_;  // eager: one bit per value whose send was posted
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

  /// Posts `op` of `rank` on pair end `end` under a FIFO model (rendezvous,
  /// serial) and completes what can complete.
  void post(int rank, int end, const Op& op) {
    End<Op>& e = this->ends_[static_cast<std::size_t>(end)];
    e.queue.push(op);
    ++e.posted;
    if (model() == Transport::Rendezvous) {
      match_pair(static_cast<unsigned>(end) >> 1);
    } else {
      this->streams_[static_cast<std::size_t>(rank)].ends.push(end);
      match_stream(rank);
    }
  }

  /// Posts `op` under eager: a send completes at once (on_sent); a receive
  /// completes when the send of its value `v` was posted (on_delivered),
  /// else waits for it (on_waiting).
  void post_eager(int end, const Op& op, bool send, std::size_t v) {
    ++this->ends_[static_cast<std::size_t>(end)].posted;
    if (send) {
      this->sent_[v / 64] |= std::uint64_t{1} << (v % 64);
      self().on_sent(end, op);
    } else if (this->sent(v)) {
      self().on_delivered(end, op);
    } else {
      self().on_waiting(end, op);
    }
  }

  // Default hooks (a policy's own hide them).
  Step enter(int, std::size_t, const Action&) { return Step::Next; }
  Step compute(int, std::size_t, const Action&) { return Step::Next; }
  Step transfer(int, std::size_t, const Action&) { return Step::Next; }
  Step bookkeeping(int, std::size_t, const Action&) { return Step::Next; }
  void prefetch(const Action*, std::size_t, std::size_t) const {}
  int stalled() { return -1; }
  bool meet(int, const Op&, int, const Op&) { return true; }
  double complete(int, const Op&, int, const Op&, double busy) { return busy; }
  void on_sent(int, const Op&) {}
  void on_delivered(int, const Op&) {}
  void on_waiting(int, const Op&) {}

 private:
  P& self() { return static_cast<P&>(*this); }

  Step dispatch(int r, std::size_t i, const Action& a) {
    P& p = self();
    const Step s = p.enter(r, i, a);
    if (s != Step::Next) return s;
    switch (deps::role(a.type)) {
      case deps::Role::Compute: return p.compute(r, i, a);
      case deps::Role::Send:
      case deps::Role::Recv: return p.transfer(r, i, a);
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
};

}  // namespace pipeplan::run
