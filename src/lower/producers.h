// Internal: where each value's producer sits on its rank, for both
// lowerings. Built on deps::for_each_output, so the dependency rules stay in
// ir/deps.h.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/deps.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// Per (stage, microbatch): the index on its rank of the action producing
/// Forward(s, m) (an F or an OVERLAP_F_B's forward) and Grad(s, m) (a B, an
/// I or an OVERLAP_F_B's backward); -1 when no action does. When a value is
/// produced twice (malformed input) the later action in rank order wins;
/// the structure checks report it.
class ProducerIndex {
 public:
  explicit ProducerIndex(const Plan& plan)
      : stages_(plan.meta.num_stages()),
        mbs_(plan.meta.num_microbatches),
        forward_(static_cast<std::size_t>(stages_) * static_cast<std::size_t>(mbs_), -1),
        grad_(forward_.size(), -1) {
    for (const auto& list : plan.ranks)
      for (std::size_t i = 0; i < list.size(); ++i)
        deps::for_each_output(list[i], [&](const deps::Value& v) {
          if (in_range(v.stage, v.microbatch))
            (v.kind == deps::Kind::Forward ? forward_ : grad_)[at(v.stage, v.microbatch)] =
                static_cast<std::int32_t>(i);
        });
  }

  bool in_range(int s, int mb) const { return s >= 0 && s < stages_ && mb >= 0 && mb < mbs_; }
  /// Producer of Forward(s, mb) / Grad(s, mb), or -1 (also out of range).
  std::int32_t forward(int s, int mb) const { return in_range(s, mb) ? forward_[at(s, mb)] : -1; }
  std::int32_t grad(int s, int mb) const { return in_range(s, mb) ? grad_[at(s, mb)] : -1; }
  std::int32_t of(bool is_grad, int s, int mb) const {
    return is_grad ? grad(s, mb) : forward(s, mb);
  }

 private:
  std::size_t at(int s, int mb) const {
    return static_cast<std::size_t>(s) * static_cast<std::size_t>(mbs_) +
           static_cast<std::size_t>(mb);
  }
  int stages_, mbs_;
  std::vector<std::int32_t> forward_, grad_;
};

}  // namespace pipeplan::detail
