// plan_step: the per-step path for microbatches of different lengths
// (docs/lengths.md). Library schedules x microbatch orders, each planned,
// lowered once per schedule and simulated at the step's lengths; the
// fastest that fits is verified. With sequences, microbatches are packed
// first, first fit decreasing and knowing the pipeline, and the faster wins.
#include "pipeplan/step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"

namespace pipeplan {
namespace {

const std::vector<std::string> kDefaultSchedules = {"1f1b", "interleaved-1f1b", "zb-h1", "zbv",
                                                    "v-half"};

// The stages per rank a schedule runs at here: 2 for interleaving (the
// least that interleaves), else its default.
int stages_per_rank_for(const ScheduleInfo& s) {
  return s.name == "interleaved-1f1b" ? 2 : s.default_stages_per_rank;
}

// The orders tried: a name and the input microbatch of each plan slot.
struct Order {
  std::string rule;
  std::vector<int> slots;
};

std::vector<Order> orders_for(const std::vector<double>& tokens, bool keep_order) {
  const int m = static_cast<int>(tokens.size());
  std::vector<int> arrival(static_cast<std::size_t>(m));
  std::iota(arrival.begin(), arrival.end(), 0);
  std::vector<Order> out{{"arrival", arrival}};
  if (keep_order) return out;
  std::vector<int> longest = arrival;
  std::stable_sort(longest.begin(), longest.end(), [&](int a, int b) {
    return tokens[static_cast<std::size_t>(a)] > tokens[static_cast<std::size_t>(b)];
  });
  std::vector<int> shortest(longest.rbegin(), longest.rend());
  // Long and short in turn: each rank's steady state pairs a long forward
  // with a short backward.
  std::vector<int> alternating;
  for (int lo = 0, hi = m - 1; lo <= hi; ++lo, --hi) {
    alternating.push_back(longest[static_cast<std::size_t>(lo)]);
    if (lo != hi) alternating.push_back(longest[static_cast<std::size_t>(hi)]);
  }
  out.push_back({"longest first", longest});
  out.push_back({"shortest first", shortest});
  out.push_back({"long and short in turn", alternating});
  return out;
}

double max_peak(const SimResult& r) {
  double peak = 0;
  for (const RankStats& s : r.ranks) peak = std::max(peak, s.peak_memory);
  return peak;
}

// The step's microbatches: each one's sequence tokens, in input order.
using Packing = std::vector<std::vector<double>>;

struct Best {
  bool found = false;
  double makespan = std::numeric_limits<double>::infinity(), peak = 0;
  double least_peak = std::numeric_limits<double>::infinity();
  Plan plan;
  SimOptions options;
  std::string schedule, rule;
  std::vector<int> slots;
  int candidates = 0;
};

// Every schedule x order on the packing; the fastest that fits.
Best evaluate(const StepRequest& req, const Packing& packing, bool keep_order) {
  Best best;
  const int m = static_cast<int>(packing.size());
  std::vector<double> tokens;
  for (const auto& mb : packing) tokens.push_back(std::accumulate(mb.begin(), mb.end(), 0.0));
  const std::vector<Order> orders = orders_for(tokens, keep_order);
  const std::vector<std::string>& names = req.schedules.empty() ? kDefaultSchedules : req.schedules;
  // The length the costs are stated at: the profile's; else, for packings
  // (which must be compared at one reference), the microbatch budget; else
  // the longest microbatch.
  const double stated = req.layers && req.layers->seq_len ? *req.layers->seq_len
                        : !req.sequences.empty()          ? req.microbatch_tokens
                                                          : 0.0;
  for (const std::string& name : names) {
    const ScheduleInfo& info = find_schedule(name);
    Plan lowered;
    SimOptions options;
    options.transport = req.transport;
    try {
      const Planner planner(Problem{info.name, req.pp_degree, m, stages_per_rank_for(info)});
      options.costs = req.costs;
      Partition partition;
      if (req.layers) {
        partition = partition_for(*req.layers, planner.meta());
        options.costs = stage_costs(*req.layers, partition, req.costs);
      }
      lowered = lower(planner.compute(), planner.lowering({}, options.costs));
      lowered.meta.partition = partition;
    } catch (const ShapeError&) {
      continue;  // this schedule does not take the shape
    }
    for (const Order& order : orders) {
      Packing slots;
      for (int k : order.slots) slots.push_back(packing[static_cast<std::size_t>(k)]);
      options.costs.set_sequences(std::move(slots), stated);
      const SimResult r = simulate(lowered, options);
      ++best.candidates;
      if (!r.ok()) continue;
      const double peak = max_peak(r);
      best.least_peak = std::min(best.least_peak, peak);
      if (req.memory_limit && peak > *req.memory_limit * (1 + 1e-9)) continue;
      if (r.makespan < best.makespan - 1e-9) {
        best.found = true;
        best.makespan = r.makespan;
        best.peak = peak;
        best.plan = lowered;
        best.options = options;
        best.schedule = info.name;
        best.rule = order.rule;
        best.slots = order.slots;
      }
    }
  }
  return best;
}

void check_request(const StepRequest& req) {
  if (req.pp_degree < 1 || req.pp_degree > limits::kMaxRanks)
    throw InputError("plan_step: pp_degree must be 1.." + std::to_string(limits::kMaxRanks) +
                     ", got " + std::to_string(req.pp_degree));
  if (req.lengths.empty() == req.sequences.empty())
    throw InputError(req.lengths.empty()
                         ? "plan_step: give the microbatches' lengths or the step's sequences"
                         : "plan_step: give lengths or sequences, not both");
  if (!req.sequences.empty() &&
      !(req.microbatch_tokens > 0 && std::isfinite(req.microbatch_tokens)))
    throw InputError("plan_step: sequences need a positive microbatch token budget");
  if (req.memory_limit && !(*req.memory_limit > 0))
    throw InputError("plan_step: the memory limit must be a positive number");
}

// The slowest stage's time for a microbatch of `tokens` tokens whose
// sequences' squared tokens sum to `squares`, plus its transfers.
std::function<double(double, double)> stage_cost_of(const StepRequest& req, int stages) {
  CostModel c = req.costs;
  if (req.layers) c = stage_costs(*req.layers, balanced_partition(*req.layers, stages), req.costs);
  const double stated =
      req.layers && req.layers->seq_len ? *req.layers->seq_len : req.microbatch_tokens;
  return [c, stated, stages](double tokens, double squares) {
    CostModel one = c;
    one.set_sequences({{tokens}}, stated);
    one.square_ratio = {squares / (stated * stated)};
    double slowest = 0;
    for (int s = 0; s < stages; ++s)
      slowest = std::max(slowest, one.duration(make(ActionType::F, s, 0)) +
                                      one.duration(make(ActionType::B, s, 0)));
    return slowest + 2 * one.transfer_time(0);
  };
}

}  // namespace

std::vector<std::vector<double>> packed_tokens(const std::vector<double>& sequences,
                                               const std::vector<std::vector<int>>& groups) {
  std::vector<std::vector<double>> out;
  for (const auto& group : groups) {
    out.emplace_back();
    for (int k : group) out.back().push_back(sequences.at(static_cast<std::size_t>(k)));
  }
  return out;
}

std::vector<std::vector<int>> first_fit_decreasing(const std::vector<double>& sequences,
                                                   double budget) {
  std::vector<int> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return sequences[static_cast<std::size_t>(a)] > sequences[static_cast<std::size_t>(b)];
  });
  std::vector<std::vector<int>> bins;
  std::vector<double> room;
  for (int k : order) {
    const double t = sequences[static_cast<std::size_t>(k)];
    if (t > budget)
      throw InputError("sequence " + std::to_string(k) + " has " + detail::format_number(t) +
                       " tokens, more than the microbatch budget of " +
                       detail::format_number(budget));
    std::size_t b = 0;
    while (b < bins.size() && room[b] < t) ++b;
    if (b == bins.size()) bins.emplace_back(), room.push_back(budget);
    bins[b].push_back(k);
    room[b] -= t;
  }
  return bins;
}

std::vector<std::vector<int>> pipeline_packing(
    const std::vector<double>& sequences, double budget, int stages,
    const std::function<double(double tokens, double squares)>& stage_cost) {
  const std::size_t n = sequences.size();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return sequences[static_cast<std::size_t>(a)] < sequences[static_cast<std::size_t>(b)];
  });
  for (int k : order)
    if (sequences[static_cast<std::size_t>(k)] > budget)
      throw InputError("sequence " + std::to_string(k) + " has " +
                       detail::format_number(sequences[static_cast<std::size_t>(k)]) +
                       " tokens, more than the microbatch budget of " +
                       detail::format_number(budget));
  // Prefix sums of tokens and of squared tokens over the sorted order.
  std::vector<double> tok(n + 1, 0.0), sq(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = sequences[static_cast<std::size_t>(order[i])];
    tok[i + 1] = tok[i] + t;
    sq[i + 1] = sq[i] + t * t;
  }
  const auto cost = [&](std::size_t i, std::size_t j) {
    return stage_cost(tok[j] - tok[i], sq[j] - sq[i]);
  };
  // Caps on a group's time: the times of the longest group starting at
  // each sequence, and of each sequence alone, thinned to at most 16.
  std::vector<double> caps;
  for (std::size_t i = 0, j = 0; i < n; ++i) {
    j = std::max(j, i + 1);
    while (j < n && tok[j + 1] - tok[i] <= budget) ++j;
    caps.push_back(cost(i, j));
    caps.push_back(cost(i, i + 1));
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  std::vector<double> tried;
  const std::size_t kCaps = 16;
  for (std::size_t k = 0; k < kCaps && !caps.empty(); ++k)
    tried.push_back(caps[std::min(caps.size() - 1, k * caps.size() / kCaps)]);
  tried.push_back(caps.empty() ? 0.0 : caps.back());
  std::vector<std::vector<int>> best;
  double best_score = std::numeric_limits<double>::infinity();
  const double inf = std::numeric_limits<double>::infinity();
  for (double cap : tried) {
    // dp[j]: least sum of group times over the first j sequences, every
    // group within the budget and the cap.
    std::vector<double> dp(n + 1, inf);
    std::vector<std::size_t> from(n + 1, 0);
    dp[0] = 0;
    for (std::size_t j = 1; j <= n; ++j)
      for (std::size_t i = j; i-- > 0;) {
        if (tok[j] - tok[i] > budget) break;
        const double t = cost(i, j);
        if (t > cap * (1 + 1e-12) || dp[i] == inf) continue;
        if (dp[i] + t < dp[j]) dp[j] = dp[i] + t, from[j] = i;
      }
    if (dp[n] == inf) continue;
    std::vector<std::vector<int>> groups;
    double longest = 0;
    for (std::size_t j = n; j > 0; j = from[j]) {
      longest = std::max(longest, cost(from[j], j));
      groups.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(from[j]),
                          order.begin() + static_cast<std::ptrdiff_t>(j));
    }
    std::reverse(groups.begin(), groups.end());
    const double score = dp[n] + (stages - 1) * longest;
    if (score < best_score) best_score = score, best = std::move(groups);
  }
  return best;
}

StepPlan plan_step(const StepRequest& req) {
  check_request(req);
  StepPlan out;
  std::vector<std::vector<int>> groups;  // with sequences: the chosen packing
  Best best;
  const auto packing_of = [&](const std::vector<std::vector<int>>& g) {
    return packed_tokens(req.sequences, g);
  };
  if (!req.sequences.empty()) {
    const std::vector<std::vector<int>> ffd =
        first_fit_decreasing(req.sequences, req.microbatch_tokens);
    const Best ffd_arrival = evaluate(req, packing_of(ffd), true);
    if (ffd_arrival.found) out.first_fit_makespan = ffd_arrival.makespan;
    best = evaluate(req, packing_of(ffd), req.keep_order);
    groups = ffd;
    // Times through one stage per rank: what each rank does per microbatch.
    const std::vector<std::vector<int>> aware = pipeline_packing(
        req.sequences, req.microbatch_tokens, req.pp_degree, stage_cost_of(req, req.pp_degree));
    Best other = evaluate(req, packing_of(aware), req.keep_order);
    other.candidates += best.candidates + ffd_arrival.candidates;
    if (other.found && (!best.found || other.makespan < best.makespan - 1e-9)) {
      best = std::move(other);
      groups = aware;
    } else {
      best.candidates = other.candidates;
    }
  } else {
    Packing singles;
    for (double t : req.lengths) singles.push_back({t});
    best = evaluate(req, singles, req.keep_order);
  }
  if (!best.found)
    throw InputError(std::isfinite(best.least_peak)
                         ? "plan_step: no schedule fits the memory limit " +
                               detail::format_number(*req.memory_limit) + " (the least peak is " +
                               detail::format_number(best.least_peak) + ")"
                         : "plan_step: no schedule tried takes " + std::to_string(req.pp_degree) +
                               " ranks with these microbatches");
  const VerifyResult proof = verify(best.plan, VerifyOptions{req.transport});
  if (!proof.ok())
    throw InternalError("plan_step: the chosen plan does not verify (a pipeplan bug)");
  out.plan = std::move(best.plan);
  out.microbatch_order = best.slots;
  if (!groups.empty())
    for (int k : best.slots) out.microbatches.push_back(groups[static_cast<std::size_t>(k)]);
  out.lengths = best.options.costs.microbatch_tokens;
  out.options = std::move(best.options);
  out.makespan = best.makespan;
  out.peak_memory = best.peak;
  out.schedule = best.schedule;
  out.order_rule = best.rule;
  out.candidates = best.candidates;
  return out;
}

}  // namespace pipeplan
