// Internal: the one home of the dependency rules, "what an action needs and
// what it produces" (docs/semantics.md), and of each action's role in the
// execution core (src/run/core.h), which every pass that runs a plan is a
// policy of; none re-derives them.
//
// Values are named by the action that produces them:
//   Forward (s, m)  the output of F(s, m): the input of F(s+1, m), and kept
//                   for the backward of (s, m);
//   Grad (s, m)     the input gradient made by B(s, m) or I(s, m): the output
//                   gradient B/I(s-1, m) consumes, and what W(s, m) follows.
// A W produces no value another action reads (it only frees memory).
//
// Memory actions (docs/memory.md) never cross ranks and make no value: they
// move or rebuild what a stage keeps for its backward. OFFLOAD(s, m) reads
// the kept Forward(s, m) (after F(s, m)); RELOAD(s, m) follows its OFFLOAD on
// the rank's copy stream, and from then until it ends the kept Forward(s, m)
// is not on the device: a RECOMPUTE or backward of (s, m) reading it waits
// for the RELOAD's end. RECOMPUTE(s, m) reads the kept Forward(s, m) (its
// input) on the compute stream, before the backward.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/hot.h"
#include "pipeplan/ir.h"

namespace pipeplan::deps {

/// How the execution core (src/run/core.h) runs an action: the hook its role
/// goes to. A new action kind gets its role here and its rules below.
enum class Role : std::uint8_t {
  Compute,      ///< F, B, I, W, OVERLAP_F_B: waits for its inputs, then runs
  Send,         ///< SEND_F, SEND_B: posted; completes per the transport model
  Recv,         ///< RECV_F, RECV_B: posted; its consumer waits for it
  Bookkeeping,  ///< FSDP pass-through: kept in order, needs and makes nothing
  Group,        ///< the first member of a BATCH_P2P group: its members are posted
                ///< together, as one unit, and the rank passes it once it ended
  Copy,         ///< OFFLOAD, RELOAD: run on the rank's copy stream, beside compute
};
inline Role role(ActionType t) {
  switch (t) {
    case ActionType::SendF:
    case ActionType::SendB: return Role::Send;
    case ActionType::RecvF:
    case ActionType::RecvB: return Role::Recv;
    case ActionType::F:
    case ActionType::B:
    case ActionType::I:
    case ActionType::W:
    case ActionType::OverlapFB:
    case ActionType::Recompute: return Role::Compute;
    case ActionType::Offload:
    case ActionType::Reload: return Role::Copy;
    default: return Role::Bookkeeping;
  }
}
/// The role of an action in its rank's list: as its type's, except that a
/// SEND/RECV marked batch_next opens a BATCH_P2P group (Action::batch_next:
/// it and the actions after it up to the first unmarked one are the group's
/// members, in posting order; a well-formed plan, first_bad_group()), and
/// one marked waited is a group of one (Action::waited).
inline Role role(const Action& a) { return a.batch_next || a.waited ? Role::Group : role(a.type); }

enum class Kind : std::uint8_t { Forward, Grad };

/// One value between actions, named by its producer.
struct Value {
  Kind kind;
  int stage, microbatch;
};

/// The stage that consumes `v` across a stage boundary: Forward(s) feeds
/// s+1, Grad(s) feeds s-1 (may be off its microbatch's route: has_consumer()).
inline int consumer_stage(const Value& v) {
  return v.kind == Kind::Forward ? v.stage + 1 : v.stage - 1;
}

/// Where each microbatch enters and leaves the pipeline: the first and last
/// stage of its route (PlanMeta::routes; by default 0 and S-1 for every
/// microbatch). A forward at its route's first stage reads the batch, a
/// backward at its last the loss; no value crosses a route's ends.
class Ends {
 public:
  /// Every microbatch crosses stages 0..num_stages-1.
  explicit Ends(int num_stages) : last_(num_stages - 1) {}
  /// The plan's routes (a copy: an Ends outlives no meta it was made from).
  explicit Ends(const PlanMeta& meta) : last_(meta.num_stages() - 1), routes_(meta.routes) {}
  PIPEPLAN_HOT int first(int mb) const {
    return in_table(mb) ? routes_[static_cast<std::size_t>(mb)].first : 0;
  }
  PIPEPLAN_HOT int last(int mb) const {
    return in_table(mb) ? routes_[static_cast<std::size_t>(mb)].last : last_;
  }
  bool on_route(int stage, int mb) const { return stage >= first(mb) && stage <= last(mb); }
  bool has_routes() const { return !routes_.empty(); }

 private:
  bool in_table(int mb) const {
    return static_cast<std::size_t>(mb) < routes_.size();  // mb < 0 wraps: not in the table
  }
  int last_;
  std::vector<Route> routes_;
};

/// Whether `v` has a consumer across a stage boundary on its microbatch's
/// route (consumer_stage(v) on the route).
inline bool has_consumer(const Value& v, const Ends& ends) {
  return ends.on_route(consumer_stage(v), v.microbatch);
}

/// Calls fn(value, stage) for every value a compute or copy action needs
/// before it starts; `stage` is the stage of the part of `a` that reads it
/// (for OVERLAP_F_B, its forward or its backward). A forward at the first
/// stage of its microbatch's route reads the batch and a backward at the
/// last the loss: no value (Ends). A value
/// read on its own stage (v.stage == stage) is the one the stage kept. A
/// RELOAD reads nothing here: it follows its OFFLOAD on the copy stream.
/// SEND/RECV need nothing here (see carried()).
template <class Fn>
PIPEPLAN_HOT void for_each_input(const Action& a, const Ends& ends, Fn&& fn) {
  auto forward = [&](int s, int m) PIPEPLAN_HOT_LAMBDA {
    if (s > ends.first(m)) fn(Value{Kind::Forward, s - 1, m}, s);
  };
  auto backward = [&](int s, int m) PIPEPLAN_HOT_LAMBDA {
    fn(Value{Kind::Forward, s, m}, s);
    if (s < ends.last(m)) fn(Value{Kind::Grad, s + 1, m}, s);
  };
  switch (a.type) {
    case ActionType::F: forward(a.stage, a.microbatch); break;
    case ActionType::B:
    case ActionType::I: backward(a.stage, a.microbatch); break;
    case ActionType::W: fn(Value{Kind::Grad, a.stage, a.microbatch}, a.stage); break;
    case ActionType::Offload:
    case ActionType::Recompute: fn(Value{Kind::Forward, a.stage, a.microbatch}, a.stage); break;
    case ActionType::OverlapFB:
      forward(a.stage, a.microbatch);
      backward(a.sub_stage, a.sub_microbatch);
      break;
    default: break;
  }
}

/// Calls fn(value) for every value a compute action produces (memory
/// actions produce none: they only move or rebuild a kept value).
template <class Fn>
inline void for_each_output(const Action& a, Fn&& fn) {
  switch (a.type) {
    case ActionType::F: fn(Value{Kind::Forward, a.stage, a.microbatch}); break;
    case ActionType::B:
    case ActionType::I: fn(Value{Kind::Grad, a.stage, a.microbatch}); break;
    case ActionType::OverlapFB:
      fn(Value{Kind::Forward, a.stage, a.microbatch});
      fn(Value{Kind::Grad, a.sub_stage, a.sub_microbatch});
      break;
    default: break;
  }
}

/// The stage on the other end of a SEND/RECV: SEND_F and RECV_B talk to
/// stage+1, RECV_F and SEND_B to stage-1 (may be off the microbatch's
/// route: peer_on_route()).
inline int peer_stage(ActionType type, int stage) {
  return (type == ActionType::SendF || type == ActionType::RecvB) ? stage + 1 : stage - 1;
}
inline int peer_stage(const Action& a) { return peer_stage(a.type, a.stage); }
/// Whether a SEND/RECV's peer stage is on its microbatch's route (a transfer
/// out of a route's ends has no other end).
inline bool peer_on_route(const Action& a, const Ends& ends) {
  return ends.on_route(peer_stage(a), a.microbatch);
}

/// The value a SEND ships or a RECV delivers: SEND_F(s) Forward(s),
/// RECV_F(s) Forward(s-1), SEND_B(s) Grad(s), RECV_B(s) Grad(s+1).
/// Precondition: is_comm(a.type).
inline Value carried(const Action& a) {
  const bool fwd = a.type == ActionType::SendF || a.type == ActionType::RecvF;
  return Value{fwd ? Kind::Forward : Kind::Grad, is_send(a.type) ? a.stage : peer_stage(a),
               a.microbatch};
}

}  // namespace pipeplan::deps
