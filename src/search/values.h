// Internal to src/search: when each value of a compute order in the making
// was produced, and when an action's inputs are there. The rules are
// ir/deps.h's (what an action reads and makes); the timing is the
// simulator's compute-only model: a value read on another rank arrives
// `transfer` after it was produced.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "ir/deps.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

inline constexpr double kNotYet = std::numeric_limits<double>::infinity();

class ValueTimes {
 public:
  ValueTimes(const PlanMeta& meta, double transfer)
      : S_(meta.num_stages()), m_(meta.num_microbatches), transfer_(transfer) {
    const auto n = static_cast<std::size_t>(S_) * static_cast<std::size_t>(m_);
    forward_.assign(n, kNotYet);
    grad_.assign(n, kNotYet);
    owner_.resize(static_cast<std::size_t>(S_));
    for (int s = 0; s < S_; ++s) owner_[static_cast<std::size_t>(s)] = meta.rank_of(s);
  }

  /// When every input of compute action `a` is on its rank; kNotYet while
  /// one has not been produced.
  double ready(const Action& a) const {
    double t = 0.0;
    deps::for_each_input(a, S_, [&](const deps::Value& v, int reader) {
      const double made = at(v);
      const double arrives = made == kNotYet ? kNotYet : made + lag(v.stage, reader);
      if (arrives > t) t = arrives;
    });
    return t;
  }

  /// Records that `a` ended at `end` (its outputs exist from then on).
  void produced(const Action& a, double end) {
    deps::for_each_output(a, [&](const deps::Value& v) { at(v) = end; });
  }
  /// Forgets every value (as freshly constructed), keeping the storage.
  void reset() {
    std::fill(forward_.begin(), forward_.end(), kNotYet);
    std::fill(grad_.begin(), grad_.end(), kNotYet);
  }
  /// Undoes produced(a, ..) (for backtracking).
  void unproduce(const Action& a) { produced(a, kNotYet); }

 private:
  std::size_t index(const deps::Value& v) const {
    return static_cast<std::size_t>(v.stage) * static_cast<std::size_t>(m_) +
           static_cast<std::size_t>(v.microbatch);
  }
  double at(const deps::Value& v) const {
    return (v.kind == deps::Kind::Forward ? forward_ : grad_)[index(v)];
  }
  double& at(const deps::Value& v) {
    return (v.kind == deps::Kind::Forward ? forward_ : grad_)[index(v)];
  }
  double lag(int producer, int reader) const {
    return owner_[static_cast<std::size_t>(producer)] == owner_[static_cast<std::size_t>(reader)]
               ? 0.0
               : transfer_;
  }

  int S_, m_;
  double transfer_;
  std::vector<double> forward_, grad_;
  std::vector<int> owner_;
};

}  // namespace pipeplan::detail
