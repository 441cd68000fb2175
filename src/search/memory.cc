// The search's memory decisions (memory.h): per rank, a sweep of device
// memory over the order's compute-only times, and the greedy that moves one
// (stage, microbatch) off the device at a time where the budget is exceeded.
#include "search/memory.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "ir/numbers.h"

#include "planner/memory_insert.h"
#include "search/improve.h"
#include "search/tuning.h"

namespace pipeplan::detail {
namespace {

enum class Keep : std::uint8_t { Kept, Recomputed, Offloaded };

// One (stage, microbatch) of a rank: where and when its forward and backward
// run, and what the decision makes of it.
struct Item {
  int stage = 0, mb = 0;
  std::size_t f_idx = 0, bwd_idx = 0, w_idx = 0;
  std::size_t rec_idx = 0;  // its RECOMPUTE goes before this index
  double f_start = 0, f_end = 0, bwd_start = 0, free_end = 0;
  double rec_start = 0;   // when its recomputed activation is back
  double pulled_end = 0;  // when it frees with its W right after its I
  bool split = false;     // an I and a W (not a B)
  bool pulled = false;    // its W moves right after its I
  double mem = 0, input = 0, copy = 0;
  double recompute_cost = 0;  // what its RECOMPUTE adds to the rank's time
  Keep keep = Keep::Kept;
  std::size_t reload_idx = 0;  // RELOAD before this index (== f_idx + 1: right after OFFLOAD)
  double reload_start = 0;
  double offload_start = 0;  // after the F's end, once the copy stream is free
  double freed() const { return pulled ? pulled_end : free_end; }
};

// A W moved earlier: from index `w` of the compute list to right before
// index `before`.
struct Pull {
  std::size_t w, before;
};

struct Interval {
  double start, end;
};

class Rank {
 public:
  Rank(const std::vector<Action>& list, const std::vector<double>& start, const StageTable& t,
       const CostModel& costs, double budget, FitStyle style)
      : budget_(budget), style_(style) {
    end_.resize(list.size());
    std::unordered_map<std::uint64_t, std::size_t> at;
    const auto key = [](int s, int mb) {
      return static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32 |
             static_cast<std::uint32_t>(mb);
    };
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const auto s = static_cast<std::size_t>(a.stage);
      const double dur = a.type == ActionType::F   ? t.f[s]
                         : a.type == ActionType::B ? t.b[s]
                         : a.type == ActionType::I ? t.i[s]
                                                   : t.w[s];
      end_[i] = start[i] + dur;
      if (a.type == ActionType::F) {
        Item it;
        it.stage = a.stage, it.mb = a.microbatch, it.f_idx = i;
        it.f_start = start[i], it.f_end = end_[i];
        it.mem = costs.memory(a.stage, a.microbatch);
        it.input = costs.input(a.stage, a.microbatch);
        it.copy = costs.copy_time(it.mem);
        at[key(a.stage, a.microbatch)] = items_.size();
        items_.push_back(it);
        continue;
      }
      const auto found = at.find(key(a.stage, a.microbatch));
      if (found == at.end()) continue;
      Item& it = items_[found->second];
      if (a.type != ActionType::W) {
        it.bwd_idx = i, it.bwd_start = start[i];
        it.split = a.type == ActionType::I;
        it.pulled_end = end_[i] + (it.split ? t.w[s] : 0.0);
        // A RECOMPUTE right before the backward (or the action ahead of it)
        // first fills the rank's wait for it.
        it.rec_idx = style.early && i > it.f_idx + 1 ? i - 1 : i;
        it.rec_start = start[it.rec_idx];
        double idle = start[i] - (i > 0 ? end_[i - 1] : 0.0);
        if (it.rec_idx < i) idle += start[i - 1] - (i > 1 ? end_[i - 2] : 0.0);
        it.recompute_cost =
            std::max(0.0, costs.duration(make(ActionType::Recompute, a.stage, a.microbatch)) - idle);
      }
      it.free_end = end_[i];  // B, or the W after an I
      if (a.type == ActionType::W) it.w_idx = i;
    }
  }

  // Moves (stage, microbatch)s off the device until the budget holds.
  bool fit(MemoryAllowed allowed) {
    for (std::size_t round = 0; round <= 2 * items_.size(); ++round) {
      const double when = first_excess();
      if (when < 0) return true;
      if (!relieve(when, allowed)) return false;
    }
    return false;
  }

  // The memory actions to insert, and the (stage, microbatch)s whose W moves
  // right after their I.
  void inserts(std::vector<MemoryInsert>& out, std::vector<Pull>& pulled, int* recomputed,
               int* offloaded) const {
    for (const Item& it : items_) {
      if (it.pulled && it.w_idx > it.bwd_idx) pulled.push_back({it.w_idx, it.bwd_idx + 1});
      if (it.keep == Keep::Recomputed) {
        out.push_back({it.rec_idx, false, make(ActionType::Recompute, it.stage, it.mb)});
        ++*recomputed;
      } else if (it.keep == Keep::Offloaded) {
        out.push_back({it.f_idx, true, make(ActionType::Offload, it.stage, it.mb)});
        const Action reload = make(ActionType::Reload, it.stage, it.mb);
        if (it.reload_idx == it.f_idx + 1) out.push_back({it.f_idx, true, reload});
        else out.push_back({it.reload_idx, false, reload});
        ++*offloaded;
      }
    }
  }

 private:
  // The first moment device memory exceeds the budget; -1 when it never does.
  double first_excess() {
    events_.clear();
    for (const Item& it : items_) {
      switch (it.keep) {
        case Keep::Kept:
          events_.push_back({it.f_start, it.mem});
          events_.push_back({it.freed(), -it.mem});
          break;
        case Keep::Recomputed:
          events_.push_back({it.f_start, it.input});
          events_.push_back({it.rec_start, it.mem});
          events_.push_back({it.freed(), -(it.input + it.mem)});
          break;
        case Keep::Offloaded:
          events_.push_back({it.f_start, it.mem});
          events_.push_back({it.offload_start + it.copy, -it.mem});
          events_.push_back({it.reload_start, it.mem});
          events_.push_back({style_.retime ? it.freed() : it.free_end, -it.mem});
          break;
      }
    }
    std::sort(events_.begin(), events_.end(), [](const Interval& x, const Interval& y) {
      return x.start != y.start ? x.start < y.start : x.end < y.end;  // frees first
    });
    double live = 0;
    for (const Interval& e : events_) {
      live += e.end;
      if (live > budget_ + kEps) return e.start;
    }
    return -1;
  }

  // Where the RELOAD of `it` goes so that it ends before the backward: the
  // latest position that leaves the copy time, on a free copy stream. False
  // when there is none (the backward would wait).
  bool place_reload(Item& it, double when) const {
    const double off_end = it.offload_start + it.copy;
    for (std::size_t j = it.bwd_idx; j > it.f_idx; --j) {
      const double start = std::max(end_[j - 1], off_end);
      if (start <= when + kEps) return false;  // back on the device too early to help
      if (start + it.copy > it.bwd_start + kEps || busy(start, start + it.copy)) continue;
      it.reload_idx = j;
      it.reload_start = start;
      return true;
    }
    return false;
  }

  // Which of two (stage, microbatch)s to recompute first. Latest: the one
  // needed last (it frees the longest stretch), the cheaper on ties.
  // Cheapest: the least time added per unit of memory freed, then the latest.
  bool recompute_first(const Item& a, const Item& b) const {
    if (style_.rule == RecomputeRule::Cheapest) {
      const double ca = a.recompute_cost / (a.mem - a.input);
      const double cb = b.recompute_cost / (b.mem - b.input);
      if (ca < cb - kEps) return true;
      if (ca > cb + kEps) return false;
    }
    return a.bwd_start > b.bwd_start + kEps ||
           (a.bwd_start >= b.bwd_start - kEps && a.recompute_cost < b.recompute_cost);
  }

  // The earliest start of `it`'s OFFLOAD from its F's end on a free stretch
  // of the copy stream.
  double offload_slot(const Item& it) const {
    double start = it.f_end;
    for (bool moved = true; moved;) {
      moved = false;
      for (const Interval& c : copies_)
        if (start < c.end - kEps && c.start < start + it.copy - kEps) start = c.end, moved = true;
    }
    return start;
  }

  bool busy(double start, double end) const {
    if (end - start <= kEps) return false;
    for (const Interval& c : copies_)
      if (start < c.end - kEps && c.start < end - kEps) return true;
    return false;
  }

  // One (stage, microbatch) alive at `when` leaves the device.
  bool relieve(double when, MemoryAllowed allowed) {
    Item* off = nullptr;
    Item* rec = nullptr;
    Item* pull = nullptr;
    Item trial;
    for (Item& it : items_) {
      // Its backward ran, its W is deferred past `when`: pulled right after
      // its I, it frees before (offloaded too when deciding again).
      if (style_.pull_w && it.split && !it.pulled &&
          (it.keep != Keep::Offloaded || style_.retime) && it.bwd_start <= when + kEps &&
          it.free_end > when + kEps && it.pulled_end <= when + kEps &&
          (!pull || it.mem > pull->mem + kEps))
        pull = &it;
      if (it.keep != Keep::Kept || it.f_start > when + kEps || it.bwd_start <= when + kEps)
        continue;
      if (allowed.offload && (!off || it.bwd_start > off->bwd_start)) {
        Item t = it;
        t.offload_start = offload_slot(it);
        if (t.offload_start + t.copy <= when + kEps && place_reload(t, when)) off = &it, trial = t;
      }
      if (allowed.recompute && it.mem > it.input + kEps && it.rec_start > when + kEps &&
          (!rec || recompute_first(it, *rec)))
        rec = &it;
    }
    if (pull) {
      pull->pulled = true;
      return true;
    }
    if (off) {
      *off = trial;
      off->keep = Keep::Offloaded;
      copies_.push_back({off->offload_start, off->offload_start + off->copy});
      copies_.push_back({off->reload_start, off->reload_start + off->copy});
      return true;
    }
    if (!rec) return false;
    rec->keep = Keep::Recomputed;
    rec->pulled = style_.pull_w && rec->split;
    return true;
  }

  double budget_;
  FitStyle style_;
  std::vector<double> end_;
  std::vector<Item> items_;
  std::vector<Interval> copies_;  // the copy stream's reserved stretches
  std::vector<Interval> events_;  // (time, memory change)
};

// `list` with each of `pulled` moved earlier; `pos` gets the new index of
// each action, or for a moved W that of the next action staying (the
// list's size: none), where what was to go before it goes.
std::vector<Action> pull_ws(const std::vector<Action>& list, std::vector<Pull> pulled,
                            std::vector<std::size_t>& pos) {
  std::vector<bool> moved(list.size(), false);
  for (const Pull& p : pulled) moved[p.w] = p.before < p.w;
  std::stable_sort(pulled.begin(), pulled.end(), [](const Pull& a, const Pull& b) {
    return a.before != b.before ? a.before < b.before : a.w < b.w;
  });
  std::vector<Action> out;
  out.reserve(list.size());
  pos.assign(list.size(), 0);
  std::size_t k = 0;
  for (std::size_t j = 0; j < list.size(); ++j) {
    for (; k < pulled.size() && pulled[k].before <= j; ++k)
      if (moved[pulled[k].w]) pos[pulled[k].w] = out.size(), out.push_back(list[pulled[k].w]);
    if (moved[j]) continue;
    pos[j] = out.size();
    out.push_back(list[j]);
  }
  for (std::size_t j = list.size(), next = out.size(); j-- > 0;)
    if (moved[j]) pos[j] = next;
    else next = pos[j];
  return out;
}

// One pass of fit_memory; `pulled_order` (when given) gets the compute
// order with the pulled Ws moved, `any_pulled` whether any moved.
std::optional<MemoryFit> fit_pass(const Plan& compute, const StageTable& table,
                                  const CostModel& costs, double budget, MemoryAllowed allowed,
                                  FitStyle style, Plan* pulled_order, bool* any_pulled) {
  const std::optional<OrderTimes> times = time_orders(compute, table);
  if (!times || !times->ok) return std::nullopt;
  MemoryFit out;
  out.plan = compute;
  if (pulled_order) *pulled_order = compute;
  *any_pulled = false;
  std::vector<MemoryInsert> inserts;
  std::vector<Pull> pulled;
  std::vector<std::size_t> pos;
  for (std::size_t r = 0; r < compute.ranks.size(); ++r) {
    Rank rank(compute.ranks[r], times->start[r], table, costs, budget, style);
    if (!rank.fit(allowed)) return std::nullopt;
    inserts.clear();
    pulled.clear();
    rank.inserts(inserts, pulled, &out.recomputed, &out.offloaded);
    if (pulled.empty()) {
      out.plan.ranks[r] = with_memory_actions(compute.ranks[r], std::move(inserts));
      continue;
    }
    *any_pulled = true;
    const std::vector<Action> order = pull_ws(compute.ranks[r], std::move(pulled), pos);
    for (MemoryInsert& ins : inserts) {
      ins.index = pos[ins.index];
      if (ins.index == order.size()) ins.index = order.size() - 1, ins.after = true;
    }
    out.plan.ranks[r] = with_memory_actions(order, std::move(inserts));
    if (pulled_order) pulled_order->ranks[r] = order;
  }
  return out;
}

}  // namespace

std::optional<MemoryFit> fit_memory(const Plan& compute, const StageTable& table,
                                    const CostModel& costs, double budget, MemoryAllowed allowed,
                                    FitStyle style) {
  if (!allowed.any()) return std::nullopt;
  Plan pulled;
  bool any = false;
  std::optional<MemoryFit> out = fit_pass(compute, table, costs, budget, allowed, style,
                                          style.retime ? &pulled : nullptr, &any);
  // Pulled Ws moved the times the copies were placed on: decided again on
  // the pulled order's own times.
  if (out && style.retime && any) {
    std::optional<MemoryFit> second =
        fit_pass(pulled, table, costs, budget, allowed, style, nullptr, &any);
    if (second) out = std::move(second);
  }
  return out;
}

}  // namespace pipeplan::detail
