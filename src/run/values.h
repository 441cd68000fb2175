// Internal: the compute-only model of the execution core (src/run/core.h):
// when each value of a compute order was produced, when a compute's inputs
// are on its rank, and the policy base that runs compute orders in it
// (lowering's timing, the search's timing, the text timeline).
//
// The rules are ir/deps.h's (what an action reads and makes); the timing is
// the simulator's compute-only model: a value read on another rank arrives
// `transfer` after it was produced, and a compute starts when its rank is
// free and its inputs are there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "ir/deps.h"
#include "pipeplan/ir.h"
#include "run/core.h"

namespace pipeplan::run {

inline constexpr double kNotYet = std::numeric_limits<double>::infinity();

/// When each value was produced. Unless kInShape (every action it is told
/// of lies within the plan's shape: the orders the search builds), values
/// outside the shape (a malformed plan) are never produced, so what reads
/// them waits.
template <bool kInShape>
class ValueTable {
 public:
  ValueTable(const PlanMeta& meta, double transfer)
      : S_(meta.num_stages()), m_(meta.num_microbatches), ends_(meta), transfer_(transfer) {
    const auto n =
        static_cast<std::size_t>(S_ > 0 ? S_ : 0) * static_cast<std::size_t>(m_ > 0 ? m_ : 0);
    forward_.assign(n, kNotYet);
    grad_.assign(n, kNotYet);
    owner_.resize(static_cast<std::size_t>(S_ > 0 ? S_ : 0));
    for (int s = 0; s < S_; ++s) owner_[static_cast<std::size_t>(s)] = meta.rank_of(s);
  }

  /// When every input of compute action `a` is on its rank; kNotYet while
  /// one has not been produced.
  double ready(const Action& a) const {
    double t = 0.0;
    deps::for_each_input(a, ends_, [&](const deps::Value& v, int reader) {
      const double made = at(v);
      const double arrives = made == kNotYet ? kNotYet : made + lag(v.stage, reader);
      if (arrives > t) t = arrives;
    });
    return t;
  }

  /// Records that `a` ended at `end` (its outputs exist from then on).
  void produced(const Action& a, double end) {
    deps::for_each_output(a, [&](const deps::Value& v) {
      if (in_range(v)) slot(v) = end;
    });
  }
  /// Undoes produced(a, ..) (for backtracking).
  void unproduce(const Action& a) { produced(a, kNotYet); }
  /// Forgets every value (as freshly constructed), keeping the storage.
  void reset() {
    std::fill(forward_.begin(), forward_.end(), kNotYet);
    std::fill(grad_.begin(), grad_.end(), kNotYet);
  }
  /// When `v` was produced; kNotYet when it was not (or is out of range).
  double at(const deps::Value& v) const {
    if (!in_range(v)) return kNotYet;
    return (v.kind == deps::Kind::Forward ? forward_ : grad_)[index(v)];
  }

 private:
  bool in_range(const deps::Value& v) const {
    if constexpr (kInShape) return true;
    return static_cast<unsigned>(v.stage) < static_cast<unsigned>(S_) &&
           static_cast<unsigned>(v.microbatch) < static_cast<unsigned>(m_);
  }
  std::size_t index(const deps::Value& v) const {
    return static_cast<std::size_t>(v.stage) * static_cast<std::size_t>(m_) +
           static_cast<std::size_t>(v.microbatch);
  }
  double& slot(const deps::Value& v) {
    return (v.kind == deps::Kind::Forward ? forward_ : grad_)[index(v)];
  }
  // A reader out of range sits on no rank of the plan: no transfer to it.
  double lag(int producer, int reader) const {
    if (!kInShape && static_cast<unsigned>(reader) >= static_cast<unsigned>(S_)) return 0.0;
    return owner_[static_cast<std::size_t>(producer)] == owner_[static_cast<std::size_t>(reader)]
               ? 0.0
               : transfer_;
  }

  int S_, m_;
  deps::Ends ends_;  // the microbatches' routes
  double transfer_;
  std::vector<double> forward_, grad_;
  std::vector<int> owner_;
};

/// Any plan's values (lowering's timing).
using ValueTimes = ValueTable<false>;
/// The values of orders built within their shape (the search's).
using ShapedValueTimes = ValueTable<true>;

/// A policy base for runs of compute orders in the compute-only model: a
/// compute starts when its rank is free and its inputs are there, and runs
/// for its duration; SEND/RECV and pass-through actions take no time. `P`
/// (deriving from ComputeOnly<P, T>) declares kOrder and provides
///   T inputs(const Action& a)           when a's inputs are there, or never()
///   void produce(const Action& a, T end)
///   T duration(const Action& a) const
///   void ran(int r, std::size_t i, const Action& a, T start, T end)
/// and may force a stuck rank through stalled() with forcing() set.
template <class P, class T = double>
class ComputeOnly : public Core<P> {
 public:
  static constexpr T never() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }

 protected:
  /// `meta`: the plan's shape (whose stages wake which rank).
  explicit ComputeOnly(const PlanMeta& meta) : meta_(meta) {}

  /// Sets the programs to run; every rank starts free at time 0.
  void start(const std::vector<std::vector<Action>>& programs) {
    free_.assign(programs.size(), T{});
    Core<P>::start(programs);
  }
  /// When rank r is free (its last compute ended).
  T free_at(int r) const { return free_[static_cast<std::size_t>(r)]; }
  /// The next compute runs whatever inputs are missing (stalled() chose it).
  bool forcing() const { return forcing_; }
  void force() { forcing_ = true; }

 private:
  friend class Core<P>;
  P& self() { return static_cast<P&>(*this); }

  Step compute(int r, std::size_t i, const Action& a) {
    const T ready = self().inputs(a);
    if (ready == never()) return Step::Wait;  // woken when a producer finishes
    forcing_ = false;
    T& free = free_[static_cast<std::size_t>(r)];
    const T start = free > ready ? free : ready;
    const T end = start + self().duration(a);
    self().produce(a, end);
    free = end;
    self().ran(r, i, a, start, end);
    if constexpr (P::kOrder != Order::Sweep) {
      // Finishing work changes what the consumers of its values may run.
      deps::for_each_output(a, [&](const deps::Value& v) {
        const int c = deps::consumer_stage(v);
        if (c < 0 || c >= meta_.num_stages()) return;
        const int cr = meta_.rank_of(c);
        if (cr < this->num_ranks()) this->wake(cr);
      });
    }
    return Step::Next;
  }

  const PlanMeta& meta_;
  std::vector<T> free_;
  bool forcing_ = false;
};

}  // namespace pipeplan::run
