// The memory actions' order rules (memory_rules.h). Messages are built only
// for a broken rule.
#include "verify/memory_rules.h"

namespace pipeplan::detail {

std::int32_t MemoryIndex::record(const Action& a, int index) {
  auto [it, fresh] = rows_.try_emplace(key(a.stage, a.microbatch), Row{-1, -1, -1});
  std::int32_t& cell = it->second[slot(a.type)];
  if (cell >= 0) return cell;
  cell = index;
  return -1;
}

std::int32_t MemoryIndex::at(ActionType type, int s, int mb) const {
  auto it = rows_.find(key(s, mb));
  return it == rows_.end() ? -1 : it->second[slot(type)];
}

namespace {

class MemoryOrder {
 public:
  MemoryOrder(const Plan& plan, const PlanIndex& index, const MemoryIndex& memory, std::size_t max)
      : plan_(plan), index_(index), memory_(memory), max_(max) {}

  std::vector<Diagnostic> run() {
    for (std::size_t r = 0; r < plan_.ranks.size() && out_.size() < max_; ++r) {
      const auto& list = plan_.ranks[r];
      for (std::size_t i = 0; i < list.size() && out_.size() < max_; ++i)
        if (is_memory(list[i].type)) check(static_cast<int>(r), static_cast<int>(i), list[i]);
    }
    return std::move(out_);
  }

 private:
  std::string name(int rank, std::int32_t index) const {
    return to_string(plan_.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)]);
  }
  void add(const char* code, int rank, int index, const std::string& message) {
    if (out_.size() < max_)
      out_.push_back({code, rank, index, name(rank, index),
                      "rank " + n2s(rank) + " index " + n2s(index) + ": " + name(rank, index) +
                          " " + message});
  }
  // `need` (named `what`, at index `at` on this rank, -1 absent) must be
  // earlier than `index`.
  void need_before(const char* code, int rank, int index, std::int32_t at, const std::string& what,
                   const char* why = "") {
    if (at >= 0 && at < index) return;
    add(code, rank, index,
        "needs " + what + " earlier on rank " + n2s(rank) +
            (at >= 0 ? " (it is at index " + n2s(at) + ")" : std::string()) + why);
  }
  // The backward of (s, mb) (B, I, or an OVERLAP_F_B's), -1 when absent.
  std::int32_t backward(int s, int mb) const {
    const std::int32_t b = index_.raw(s, mb, kB);
    return b >= 0 ? b : index_.raw(s, mb, kI);
  }
  // `index` must come before the backward at `bwd` (when there is one).
  void before_backward(const char* code, int rank, int index, std::int32_t bwd, const char* what) {
    if (bwd < 0 || index < bwd) return;
    add(code, rank, index,
        "must come before " + name(rank, bwd) + " (index " + n2s(bwd) + "), which reads the " +
            "activations it " + what);
  }

  void check(int r, int i, const Action& a) {
    const int s = a.stage, mb = a.microbatch;
    const std::int32_t f = index_.raw(s, mb, kF), bwd = backward(s, mb);
    const std::string forward = to_string(make(ActionType::F, s, mb));
    const std::string offload = to_string(make(ActionType::Offload, s, mb));
    const std::string reload = to_string(make(ActionType::Reload, s, mb));
    const std::int32_t off = memory_.at(ActionType::Offload, s, mb);
    const std::int32_t rel = memory_.at(ActionType::Reload, s, mb);
    switch (a.type) {
      case ActionType::Offload:
        need_before("offload-before-forward", r, i, f, forward, ", whose activations it moves");
        if (bwd >= 0 && bwd < i)
          add("offload-after-backward", r, i,
              "comes after " + name(r, bwd) + " (index " + n2s(bwd) +
                  "), which already freed the activations it would move");
        else if (rel < 0)
          add("offload-without-reload", r, i,
              "moves stage " + n2s(s) + " microbatch " + n2s(mb) +
                  "'s activations to host, but no " + reload +
                  " brings them back for its backward");
        break;
      case ActionType::Reload:
        if (off < 0) {
          add("reload-without-offload", r, i,
              "brings back activations that no " + offload + " moved to host");
          break;
        }
        need_before("reload-before-offload", r, i, off, offload);
        before_backward("reload-after-backward", r, i, bwd, "brings back");
        break;
      default:  // RECOMPUTE
        need_before("recompute-before-forward", r, i, f, forward, ", whose input it re-runs from");
        if (rel >= 0)
          need_before("recompute-before-reload", r, i, rel, reload,
                      ": the input it re-runs from is on host until then");
        before_backward("recompute-after-backward", r, i, bwd, "rebuilds");
        break;
    }
  }

  const Plan& plan_;
  const PlanIndex& index_;
  const MemoryIndex& memory_;
  std::size_t max_;
  std::vector<Diagnostic> out_;
};

}  // namespace

std::vector<Diagnostic> check_memory_order(const Plan& plan, const PlanIndex& index,
                                           const MemoryIndex& memory, std::size_t max) {
  if (memory.empty() || max == 0) return {};
  return MemoryOrder(plan, index, memory, max).run();
}

}  // namespace pipeplan::detail
