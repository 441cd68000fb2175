// The search's memory-decision phase (memory.h, memory_candidates): orders
// that do not fit get their memory actions in several styles, the best few
// have their orders improved and are polished with the actions in place.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "ir/numbers.h"
#include "search/climb.h"
#include "search/context.h"
#include "search/improve.h"
#include "search/memory.h"
#include "search/memory_polish.h"

namespace pipeplan::detail {
namespace {

std::string budget_text(double scale) {
  return scale > 0 ? format_number(scale, 2) + "x the budget" : std::string("no budget");
}

std::string style_text(FitStyle style) {
  std::string s = style.rule == RecomputeRule::Cheapest ? " (cheapest recompute first" : "";
  if (style.pull_w) s += s.empty() ? " (W right after I when recomputed" : ", W right after I";
  if (style.early) s += s.empty() ? " (recomputed an action early" : ", recomputed an action early";
  if (style.retime)
    s += s.empty() ? " (decided again after the pulls" : ", decided again after the pulls";
  return s.empty() ? s : s + ")";
}

// Fits `order` to the budget; the simulated peak can exceed what the fit
// assumed (inserted work shifts the times), so tighter targets are tried.
std::optional<MemoryCandidate> fit_one(const Plan& order, const StageTable& table,
                                       const SimOptions& options, MemoryAllowed allowed,
                                       FitStyle style, SearchContext& ctx) {
  const double budget = ctx.budget.limit;
  double target = budget;
  for (int attempt = 0; attempt < 3 && target > 0; ++attempt) {
    std::optional<MemoryFit> fit = fit_memory(order, table, options.costs, target, allowed, style);
    if (!fit) return std::nullopt;
    if (fit->recomputed + fit->offloaded == 0) return std::nullopt;  // fits as it is
    const SimResult r = simulate(fit->plan, options);
    ++ctx.evaluations;
    if (!r.ok()) return std::nullopt;
    const double peak = max_peak(r);
    if (ctx.budget.fits(peak)) {
      double finish = 0.0;
      for (const RankStats& st : r.ranks) finish += st.last_end;
      // No counts in the origin: later phases (the polish) change them, and
      // the report states the final plan's (SearchResult::recomputed).
      return MemoryCandidate{std::move(fit->plan), r.makespan, peak, std::string(), finish};
    }
    target -= peak - budget;
  }
  return std::nullopt;
}

}  // namespace

// See memory.h.
double recompute_tax(double act, double input, double rec, int in_flight, int m, double budget) {
  if (in_flight * act <= budget + kEps) return 0.0;
  const double floor = act + (in_flight - 1) * input;
  if (floor > budget + kEps || act <= input + kEps) return std::numeric_limits<double>::infinity();
  const double kept = std::floor((budget - floor) / (act - input) + kEps);
  const double recomputed = std::max(0.0, in_flight - 1 - kept);
  return m * recomputed / in_flight * rec;
}

// Min-max by dynamic programming over the layer boundaries.
std::optional<Partition> recompute_balanced(const LayerProfile& profile, int p, int m,
                                            double budget) {
  const std::size_t L = profile.size(), P = static_cast<std::size_t>(p);
  if (P > L || static_cast<double>(P) * static_cast<double>(L) * static_cast<double>(L) > 2e6)
    return std::nullopt;
  // Prefix sums of m x (F + B), activations and recompute times.
  std::vector<double> work(L + 1, 0.0), act(work), rec(work);
  for (std::size_t l = 0; l < L; ++l) {
    const Layer& x = profile.layers[l];
    work[l + 1] = work[l] + m * (x.f + x.b);
    act[l + 1] = act[l] + x.activation;
    rec[l + 1] = rec[l] + x.recompute_time();
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[r][l]: the least max cost of ranks 0..r-1 holding layers [0, l).
  std::vector<std::vector<double>> best(P + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<std::size_t>> cut(P + 1, std::vector<std::size_t>(L + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t a = r; a + (P - r) <= L; ++a) {
      if (best[r][a] == kInf) continue;
      for (std::size_t b = a + 1; b + (P - r - 1) <= L; ++b) {
        const double cost = work[b] - work[a] +
                            recompute_tax(act[b] - act[a], profile.layers[a].input_size(),
                                          rec[b] - rec[a], p - static_cast<int>(r), m, budget);
        const double v = std::max(best[r][a], cost);
        if (v < best[r + 1][b] - kEps) best[r + 1][b] = v, cut[r + 1][b] = a;
      }
    }
  if (best[P][L] == kInf) return std::nullopt;
  Partition part(P);
  for (std::size_t r = P, b = L; r > 0; --r) {
    const std::size_t a = cut[r][b];
    part[r - 1] = static_cast<int>(b - a);
    b = a;
  }
  return part;
}

namespace {

class Phase {
 public:
  Phase(const LayerProfile* profile, MemoryAllowed allowed, SearchContext& ctx)
      : profile_(profile), allowed_(allowed), ctx_(ctx) {}

  std::vector<MemoryCandidate> run(const std::vector<MemorySeed>& seeds) {
    if (!build(seeds) || !build(rebalanced(seeds))) return std::move(out_);
    restyle();
    improve();
    refine();
    polish(best_first(), kMemoryPolish.starts);
    retime();
    return std::move(out_);
  }

 private:
  // What a candidate was fitted from: its order, the budget it was built for
  // (max: a library order), and how.
  struct Source {
    Plan order;  ///< its meta holds the partition
    double limit;
    SimOptions options;  ///< the partition's stage costs
    FitStyle style;
    std::string origin;  ///< the order's
  };

  std::optional<MemoryCandidate> fit_source(const Source& src) {
    const StageTable table = stage_table(src.options.costs, src.order.meta.num_stages());
    std::optional<MemoryCandidate> c =
        fit_one(src.order, table, src.options, allowed_, src.style, ctx_);
    if (c) c->origin = src.origin + ", memory decided" + style_text(src.style);
    return c;
  }

  void fit(Source src) {
    std::optional<MemoryCandidate> c = fit_source(src);
    if (!c) return;
    out_.push_back(std::move(*c));
    sources_.push_back(std::move(src));
  }

  // `src` fitted in the first style that fits it; one that fits none is
  // tried in the styles deciding again after the pulls, held apart until
  // retime().
  void fit_first(Source src) {
    for (const FitStyle style : kFitStyles) {
      src.style = style;
      const std::size_t n = out_.size();
      fit(src);
      if (out_.size() > n) return;
    }
    for (const FitStyle style : kRetimeStyles) {
      src.style = style;
      std::optional<MemoryCandidate> c = fit_source(src);
      if (!c) continue;
      held_.emplace_back(std::move(*c), std::move(src));
      return;
    }
  }

  // Each seed's order, or the list scheduler's at every virtual budget,
  // fitted in the first style. False when time ran out.
  bool build(const std::vector<MemorySeed>& seeds) {
    for (const MemorySeed& seed : seeds) {
      if (ctx_.expired()) return false;
      if (!seed.order.ranks.empty()) {
        fit_first({seed.order, std::numeric_limits<double>::max(), seed.options, kFitStyles[0],
                   seed.origin});
        continue;
      }
      const StageTable table = stage_table(seed.options.costs, seed.meta.num_stages());
      for (const double scale : kVirtualBudgets)
        for (bool split : {true, false})
          for (bool forward_first : {false, true}) {
            if (ctx_.expired()) return false;
            const double limit =
                scale > 0 ? ctx_.budget.limit * scale : std::numeric_limits<double>::max();
            const GreedyKnobs knobs{split, forward_first, false, 1.0};
            ++ctx_.evaluations;
            std::optional<GreedyOutcome> g = list_schedule(seed.meta, table, limit, knobs);
            if (!g || ctx_.budget.fits(g->peak)) continue;  // fits already: the search has it
            fit_first({std::move(g->plan), limit, seed.options, kFitStyles[0],
                       seed.origin + (split ? ", I/W split" : ", B whole") +
                           (forward_first ? ", forward-first" : ", backward-first") +
                           ", ordered for " + budget_text(scale)});
          }
      // Paced admission (greedy.h): orders holding about one round trip's
      // microbatches, whatever the budget lets in.
      for (const double scale : kPacedBudgets)
        for (const double pace : kPaces)
          for (const int burst : {0, 1, 2}) {
            if (ctx_.expired()) return false;
            const double limit =
                scale > 0 ? ctx_.budget.limit * scale : std::numeric_limits<double>::max();
            GreedyKnobs knobs{true, false, false, 1.0};
            knobs.pace = pace;
            knobs.burst = burst;
            ++ctx_.evaluations;
            std::optional<GreedyOutcome> g = list_schedule(seed.meta, table, limit, knobs);
            if (!g || ctx_.budget.fits(g->peak)) continue;
            fit_first({std::move(g->plan), limit, seed.options, kFitStyles[0],
                       seed.origin + ", I/W split, paced at " + format_number(pace, 2) +
                           "x the busiest rank's work per microbatch after " +
                           std::to_string(burst) + ", ordered for " + budget_text(scale)});
          }
    }
    return true;
  }

  // The seeds at v = 1 again on the partition that balances work plus what
  // recomputing adds (recompute_balanced), when it differs from theirs.
  std::vector<MemorySeed> rebalanced(const std::vector<MemorySeed>& seeds) const {
    std::vector<MemorySeed> out;
    if (!profile_ || !allowed_.recompute || seeds.empty()) return out;
    const PlanMeta& meta = seeds.front().meta;
    const std::optional<Partition> part =
        recompute_balanced(*profile_, meta.pp_degree, meta.num_microbatches, ctx_.budget.limit);
    if (!part) return out;
    for (const MemorySeed& seed : seeds) {
      if (seed.meta.num_stages() != seed.meta.pp_degree || seed.meta.partition == *part) continue;
      MemorySeed s = seed;
      s.meta.partition = *part;
      s.order.meta.partition = *part;
      s.options.costs = stage_costs(*profile_, *part, seed.options.costs);
      s.origin += " on a partition balancing recompute";
      out.push_back(std::move(s));
    }
    return out;
  }

  // Candidate indices, fastest first.
  std::vector<std::size_t> best_first() const {
    std::vector<std::size_t> order(out_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return out_[a].makespan < out_[b].makespan - kEps;
    });
    return order;
  }

  // The best `n` candidates of distinct orders (`keep` true), fastest first.
  template <class Keep>
  std::vector<std::size_t> best_distinct(std::size_t n, Keep keep) const {
    std::vector<std::size_t> picked;
    for (std::size_t i : best_first()) {
      if (picked.size() >= n) break;
      if (!keep(sources_[i])) continue;
      bool dup = false;
      for (std::size_t j : picked) dup = dup || sources_[j].order == sources_[i].order;
      if (!dup) picked.push_back(i);
    }
    return picked;
  }

  // The best few orders fitted in the other styles too.
  void restyle() {
    for (std::size_t i : best_distinct(kRestyled, [](const Source&) { return true; }))
      for (const FitStyle style : kFitStyles) {
        if (ctx_.expired()) return;
        if (style.rule == sources_[i].style.rule && style.pull_w == sources_[i].style.pull_w &&
            style.early == sources_[i].style.early && style.retime == sources_[i].style.retime)
          continue;
        Source src = sources_[i];
        src.style = style;
        fit(std::move(src));
      }
  }

  // The orders of the best few list-scheduled candidates improved locally
  // for the memory they were built for (improve.h), then fitted again.
  void improve() {
    const auto listed = [](const Source& s) {
      return s.limit != std::numeric_limits<double>::max();
    };
    for (std::size_t i : best_distinct(kMemoryImprove.starts, listed)) {
      if (ctx_.expired()) return;
      Source src = sources_[i];
      const StageTable table = stage_table(src.options.costs, src.order.meta.num_stages());
      auto imp = improve_within(src.order, table, Budget{src.limit}, kMemoryImprove.work, ctx_);
      if (!imp) continue;
      const double before = out_[i].makespan;
      const std::size_t n = out_.size();
      src.order = std::move(imp->plan);
      src.origin += ", orders improved locally";
      fit(std::move(src));
      if (out_.size() > n && out_.back().makespan >= before - kEps) {
        out_.pop_back();
        sources_.pop_back();
      }
    }
  }

  // The partitions of the best few candidates hill-climbed, one layer across
  // one boundary at a time, the order's memory decided again on each (what
  // must be recomputed changes with the stages' sizes).
  void refine() {
    if (!profile_) return;
    for (std::size_t i : best_distinct(kMemoryRefine.starts, [](const Source&) { return true; })) {
      Source src = sources_[i];
      double best = out_[i].makespan, finish = out_[i].finish;
      std::optional<MemoryCandidate> kept;
      Partition part = src.order.meta.partition;
      const auto keep = [&](const Partition& np) {
        Source next = src;
        next.order.meta.partition = np;
        next.options.costs = stage_costs(*profile_, np, src.options.costs);
        std::optional<MemoryCandidate> c = fit_source(next);
        // Equal makespans move on when the ranks finish earlier in sum
        // (one layer off the busiest rank may need another off the next).
        if (!c || c->makespan > best + kEps ||
            (c->makespan >= best - kEps && c->finish >= finish - kEps))
          return false;
        best = c->makespan, finish = c->finish;
        src = std::move(next), kept = std::move(c);
        return true;
      };
      const auto stop = [this] { return ctx_.expired(); };
      climb_partition(part, kMemoryRefine.rounds, stop, keep);
      if (!kept || kept->makespan >= out_[i].makespan - kEps) continue;
      kept->origin += ", partition refined";
      out_.push_back(std::move(*kept));
      sources_.push_back(std::move(src));
    }
  }

  // The best few candidates polished with their memory actions in place
  // (memory_polish.h): RECOMPUTEs the budget does not need dropped, work
  // pulled into the idle time the inserted actions left.
  void polish(const std::vector<std::size_t>& order, std::size_t n) {
    for (std::size_t k = 0; k < order.size() && k < n && !ctx_.expired(); ++k) {
      const MemoryCandidate& c = out_[order[k]];
      Polished p = polish_memory(c.plan, sources_[order[k]].options,
                                 evaluations_within(kMemoryPolish.work, c.plan), ctx_);
      if (p.moves == 0 || p.makespan >= c.makespan - kEps) continue;
      MemoryCandidate better{std::move(p.plan), p.makespan, p.peak, c.origin + ", polished",
                             c.finish};
      Source src = sources_[order[k]];
      out_.push_back(std::move(better));
      sources_.push_back(std::move(src));
    }
  }
  // The best few distinct orders fitted in the styles that decide again
  // after the pulls; with the orders only those styles fit (held_), the
  // best few of them polished. After the rest of the phase, so that what it
  // picks for its own steps stays as it was.
  void retime() {
    const std::vector<std::size_t> picked =
        best_distinct(kRetimed, [](const Source&) { return true; });
    std::vector<std::size_t> fresh;
    for (auto& [c, src] : held_) {
      fresh.push_back(out_.size());
      out_.push_back(std::move(c));
      sources_.push_back(std::move(src));
    }
    for (std::size_t i : picked)
      for (const FitStyle style : kRetimeStyles) {
        if (ctx_.expired()) return;
        Source src = sources_[i];
        src.style = style;
        const std::size_t n = out_.size();
        fit(std::move(src));
        if (out_.size() > n) fresh.push_back(n);
      }
    std::stable_sort(fresh.begin(), fresh.end(), [&](std::size_t a, std::size_t b) {
      return out_[a].makespan < out_[b].makespan - kEps;
    });
    polish(fresh, kRetimePolished);
  }

  const LayerProfile* profile_;
  MemoryAllowed allowed_;
  SearchContext& ctx_;
  std::vector<MemoryCandidate> out_;
  std::vector<Source> sources_;                           // with out_, index for index
  std::vector<std::pair<MemoryCandidate, Source>> held_;  // for retime()
};

}  // namespace

std::vector<MemoryCandidate> memory_candidates(const std::vector<MemorySeed>& seeds,
                                               const LayerProfile* profile, MemoryAllowed allowed,
                                               SearchContext& ctx) {
  if (!allowed.any()) return {};
  return Phase(profile, allowed, ctx).run(seeds);
}

}  // namespace pipeplan::detail
