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

namespace pipeplan::detail {
namespace {

constexpr double kEps = 1e-9;

enum class Keep : std::uint8_t { Kept, Recomputed, Offloaded };

// One (stage, microbatch) of a rank: where and when its forward and backward
// run, and what the decision makes of it.
struct Item {
  int stage = 0, mb = 0;
  std::size_t f_idx = 0, bwd_idx = 0;
  double f_start = 0, f_end = 0, bwd_start = 0, free_end = 0;
  double mem = 0, input = 0, copy = 0;
  double recompute_cost = 0;  // what its RECOMPUTE adds to the rank's time
  Keep keep = Keep::Kept;
  std::size_t reload_idx = 0;  // RELOAD before this index (== f_idx + 1: right after OFFLOAD)
  double reload_start = 0;
};

struct Interval {
  double start, end;
};

class Rank {
 public:
  Rank(const std::vector<Action>& list, const std::vector<double>& start, const StageTable& t,
       const CostModel& costs, double budget)
      : budget_(budget) {
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
        it.mem = costs.memory(a.stage), it.input = costs.input(a.stage);
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
        // A RECOMPUTE right before the backward first fills the rank's wait for it.
        const double idle = start[i] - (i > 0 ? end_[i - 1] : 0.0);
        it.recompute_cost = std::max(0.0, costs.duration(make(ActionType::Recompute, a.stage, 0)) - idle);
      }
      it.free_end = end_[i];  // B, or the W after an I
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

  void inserts(std::vector<MemoryInsert>& out, int* recomputed, int* offloaded) const {
    for (const Item& it : items_) {
      if (it.keep == Keep::Recomputed) {
        out.push_back({it.bwd_idx, false, make(ActionType::Recompute, it.stage, it.mb)});
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
          events_.push_back({it.free_end, -it.mem});
          break;
        case Keep::Recomputed:
          events_.push_back({it.f_start, it.input});
          events_.push_back({it.bwd_start, it.mem});
          events_.push_back({it.free_end, -(it.input + it.mem)});
          break;
        case Keep::Offloaded:
          events_.push_back({it.f_start, it.mem});
          events_.push_back({it.f_end + it.copy, -it.mem});
          events_.push_back({it.reload_start, it.mem});
          events_.push_back({it.free_end, -it.mem});
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
    const double off_end = it.f_end + it.copy;
    if (busy(it.f_end, off_end)) return false;
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
    Item trial;
    for (Item& it : items_) {
      if (it.keep != Keep::Kept || it.f_start > when + kEps || it.bwd_start <= when + kEps)
        continue;
      if (allowed.offload && it.f_end + it.copy <= when + kEps &&
          (!off || it.bwd_start > off->bwd_start)) {
        Item t = it;
        if (place_reload(t, when)) off = &it, trial = t;
      }
      // The one needed last (it frees the longest stretch), the cheaper on ties.
      if (allowed.recompute && it.mem > it.input + kEps &&
          (!rec || it.bwd_start > rec->bwd_start + kEps ||
           (it.bwd_start >= rec->bwd_start - kEps && it.recompute_cost < rec->recompute_cost)))
        rec = &it;
    }
    if (off) {
      *off = trial;
      off->keep = Keep::Offloaded;
      copies_.push_back({off->f_end, off->f_end + off->copy});
      copies_.push_back({off->reload_start, off->reload_start + off->copy});
      return true;
    }
    if (!rec) return false;
    rec->keep = Keep::Recomputed;
    return true;
  }

  double budget_;
  std::vector<double> end_;
  std::vector<Item> items_;
  std::vector<Interval> copies_;  // the copy stream's reserved stretches
  std::vector<Interval> events_;  // (time, memory change)
};

}  // namespace

std::optional<MemoryFit> fit_memory(const Plan& compute, const StageTable& table,
                                    const CostModel& costs, double budget, MemoryAllowed allowed) {
  if (!allowed.any()) return std::nullopt;
  const std::optional<OrderTimes> times = time_orders(compute, table);
  if (!times || !times->ok) return std::nullopt;
  MemoryFit out;
  out.plan = compute;
  for (std::size_t r = 0; r < compute.ranks.size(); ++r) {
    Rank rank(compute.ranks[r], times->start[r], table, costs, budget);
    if (!rank.fit(allowed)) return std::nullopt;
    std::vector<MemoryInsert> inserts;
    rank.inserts(inserts, &out.recomputed, &out.offloaded);
    out.plan.ranks[r] = with_memory_actions(compute.ranks[r], std::move(inserts));
  }
  return out;
}

namespace {

double peak_of(const SimResult& r) {
  double peak = 0.0;
  for (const RankStats& s : r.ranks) peak = std::max(peak, s.peak_memory);
  return peak;
}

std::string fit_text(const MemoryFit& fit) {
  std::string s;
  if (fit.recomputed > 0) s += std::to_string(fit.recomputed) + " recomputed";
  if (fit.offloaded > 0) s += std::string(s.empty() ? "" : ", ") + std::to_string(fit.offloaded) + " offloaded";
  return s.empty() ? "no memory actions" : s;
}

// Fits `order` to `budget`; the simulated peak can exceed what the fit
// assumed (inserted work shifts the times), so tighter targets are tried.
std::optional<MemoryCandidate> fit_one(const Plan& order, const StageTable& table,
                                       const SimOptions& options, double budget,
                                       MemoryAllowed allowed, int* evaluations) {
  double target = budget;
  for (int attempt = 0; attempt < 3 && target > 0; ++attempt) {
    std::optional<MemoryFit> fit = fit_memory(order, table, options.costs, target, allowed);
    if (!fit) return std::nullopt;
    if (fit->recomputed + fit->offloaded == 0) return std::nullopt;  // fits as it is
    const SimResult r = simulate(fit->plan, options);
    ++*evaluations;
    if (!r.ok()) return std::nullopt;
    const double peak = peak_of(r);
    if (peak <= budget + kEps)
      return MemoryCandidate{std::move(fit->plan), r.makespan, peak, fit_text(*fit)};
    target -= peak - budget;
  }
  return std::nullopt;
}

// The budgets the list scheduler builds orders for: more memory than there
// is, which the memory actions then recover.
// How many of the best candidates get their orders improved, and the work
// each may spend (plans timed x actions per plan, as the search's own phase).
constexpr std::size_t kImproved = 3;
constexpr long long kImproveWork = 4000000;

constexpr double kVirtualBudgets[] = {1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 0.0};  // x budget; 0: no limit

// The orders of the best few candidates improved locally for the memory
// they were built for (improve.h), then fitted again.
template <class Source>
void improve_best(std::vector<MemoryCandidate>& out, const std::vector<Source>& sources,
                  double budget, MemoryAllowed allowed, const std::function<bool()>& expired,
                  int* evaluations) {
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return out[a].makespan < out[b].makespan - kEps;
  });
  const std::size_t n = std::min<std::size_t>(order.size(), kImproved);
  for (std::size_t k = 0; k < n && !expired(); ++k) {
    const Source& src = sources[order[k]];
    if (src.limit == std::numeric_limits<double>::max()) continue;  // a library order
    const StageTable table = stage_table(src.seed->options.costs, src.seed->meta.num_stages());
    std::size_t actions = 1;
    for (const auto& list : src.order.ranks) actions += list.size();
    const auto evals = std::max<long long>(100, kImproveWork / static_cast<long long>(actions));
    auto imp = improve_orders(src.order, table, src.limit, evals, expired, evaluations);
    if (!imp) continue;
    std::optional<MemoryCandidate> c =
        fit_one(imp->plan, table, src.seed->options, budget, allowed, evaluations);
    if (!c || c->makespan >= out[order[k]].makespan - kEps) continue;
    c->origin = out[order[k]].origin.substr(0, out[order[k]].origin.find(", memory decided")) +
                ", orders improved locally, memory decided: " + c->origin;
    out.push_back(std::move(*c));
  }
}

}  // namespace

std::vector<MemoryCandidate> memory_candidates(const std::vector<MemorySeed>& seeds, double budget,
                                               MemoryAllowed allowed,
                                               const std::function<bool()>& expired,
                                               int* evaluations) {
  std::vector<MemoryCandidate> out;
  if (!allowed.any()) return out;
  // What each candidate was fitted from: its order, and the budget it was built for.
  struct Source {
    Plan order;
    double limit;
    const MemorySeed* seed;
  };
  std::vector<Source> sources;
  const auto keep = [&](const Plan& order, double limit, const MemorySeed& seed,
                        const StageTable& table, const std::string& origin) {
    std::optional<MemoryCandidate> c =
        fit_one(order, table, seed.options, budget, allowed, evaluations);
    if (!c) return;
    c->origin = origin + ", memory decided: " + c->origin;
    out.push_back(std::move(*c));
    sources.push_back({order, limit, &seed});
  };
  for (const MemorySeed& seed : seeds) {
    if (expired()) return out;
    const StageTable table = stage_table(seed.options.costs, seed.meta.num_stages());
    if (!seed.order.ranks.empty()) {
      keep(seed.order, std::numeric_limits<double>::max(), seed, table, seed.origin);
      continue;
    }
    for (const double scale : kVirtualBudgets)
      for (bool split : {true, false})
        for (bool forward_first : {false, true}) {
          if (expired()) return out;
          const double limit = scale > 0 ? budget * scale : std::numeric_limits<double>::max();
          const GreedyKnobs knobs{split, forward_first, false, 1.0};
          ++*evaluations;
          std::optional<GreedyOutcome> g = list_schedule(seed.meta, table, limit, knobs);
          if (!g || g->peak <= budget + kEps) continue;  // fits already: the search has it
          keep(g->plan, limit, seed, table,
               seed.origin + (split ? ", I/W split" : ", B whole") +
                   (forward_first ? ", forward-first" : ", backward-first") + ", ordered for " +
                   (scale > 0 ? format_number(scale, 2) + "x the budget" : std::string("no budget")));
        }
  }
  improve_best(out, sources, budget, allowed, expired, evaluations);
  return out;
}

}  // namespace pipeplan::detail
