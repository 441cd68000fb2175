// The one check of a cost model, shared by lower(), simulate() and the cost
// options' reader.
#include "model/cost_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::detail {

std::string cost_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {

// Whether `types` ("B,I,W") lists `letter`.
bool lists(const std::string& types, char letter) {
  return ("," + types + ",").find(std::string(",") + letter + ",") != std::string::npos;
}

// The (stage, type letter) durations an action is costed from.
std::vector<std::pair<int, char>> cost_terms(const Action& a) {
  switch (a.type) {
    case ActionType::F: return {{a.stage, 'F'}};
    case ActionType::B: return {{a.stage, 'B'}};
    case ActionType::I: return {{a.stage, 'I'}};
    case ActionType::W: return {{a.stage, 'W'}};
    case ActionType::OverlapFB: return {{a.stage, 'F'}, {a.sub_stage, 'B'}};
    case ActionType::Recompute: return {{a.stage, 'F'}};
    default: return {};
  }
}

// The longest microbatch's costs stay bounded: ratios up to
// limits::kMaxLengthRatio, and every cost grown by the largest r^2.
template <class Bounded>
void check_length_growth(const CostModel& c, const std::string& prefix, const Bounded& bounded) {
  double grow = 1.0, longest = 1.0;
  for (std::size_t k = 0; k < c.length_ratio.size(); ++k) {
    const double r = c.length_ratio[k];
    if (!(r > 0) || r > limits::kMaxLengthRatio)
      throw InputError(prefix + "microbatch " + std::to_string(k) + " is " + cost_text(r) +
                       " times the length the costs are stated at (at most " +
                       cost_text(limits::kMaxLengthRatio) + ")");
    grow = std::max(grow, r * r);
    longest = std::max(longest, r);
  }
  if (grow == 1.0) return;
  double most = std::max({c.f, c.b, c.i, c.w, c.overlap.value_or(0.0)});
  for (const auto& [stage, scale] : c.stage_scales)
    most = std::max({most, c.f * scale.f, c.b * scale.b, c.i * scale.i, c.w * scale.w});
  for (double v : c.stage_recompute) most = std::max(most, v);
  bounded("cost of the longest microbatch", most * grow);
  bounded("transfer time of the longest microbatch",
          c.comm_latency +
              (c.comm_bandwidth > 0 ? c.transfer_bytes * longest / c.comm_bandwidth : 0.0));
}

}  // namespace

void check_measured(const CostModel& c, const Plan& plan) {
  if (c.unmeasured.empty()) return;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (const Action& a : plan.ranks[r])
      for (const auto& [stage, letter] : cost_terms(a)) {
        const auto it = c.unmeasured.find(stage);
        if (it == c.unmeasured.end() || !lists(it->second, letter)) continue;
        throw InputError("stage " + std::to_string(stage) + "'s " + std::string(1, letter) +
                         " was not measured (the calibrated run had no " + it->second +
                         " on it), and the plan runs " + to_string(a) + " on rank " +
                         std::to_string(plan.rank_ids[r]) +
                         ": calibrate from a run that has them, or state them (--cost)");
      }
}

void check_costs(const CostModel& c, int num_stages, const std::string& prefix) {
  auto bounded = [&prefix](const std::string& what, double v) {
    if (std::isnan(v) || v < 0)
      throw InputError(prefix + what + " " + cost_text(v) + " must be a non-negative number");
    if (v > limits::kMaxCost)  // inf included: an overflow is refused, not simulated
      throw InputError(prefix + what + " " + cost_text(v) + " is more than the supported " +
                       cost_text(limits::kMaxCost) + " time units");
  };
  bounded("cost F", c.f);
  bounded("cost B", c.b);
  bounded("cost I", c.i);
  bounded("cost W", c.w);
  if (c.overlap) bounded("cost OVERLAP_F_B", *c.overlap);
  bounded("comm latency", c.comm_latency);
  for (double v : {c.comm_bandwidth, c.transfer_bytes})
    if (!std::isfinite(v) || v < 0)
      throw InputError(prefix +
                       "comm bandwidth and transfer bytes must be finite and non-negative (got " +
                       cost_text(c.comm_bandwidth) + " and " + cost_text(c.transfer_bytes) + ")");
  bounded("transfer time (latency + bytes / bandwidth)", c.transfer_time());
  for (const auto& [stage, scale] : c.stage_scales) {
    if (stage < 0 || stage >= num_stages)
      throw InputError(prefix + "stage costs name stage " + std::to_string(stage) +
                       ", but the plan has " + std::to_string(num_stages) + " stages (0.." +
                       std::to_string(num_stages - 1) + ")");
    for (double v : {scale.f, scale.b, scale.i, scale.w})
      if (!std::isfinite(v) || v < 0)
        throw InputError(prefix + "stage " + std::to_string(stage) +
                         " cost multipliers must be non-negative");
    const std::string what = "stage " + std::to_string(stage) + " scaled cost";
    bounded(what + " F", c.f * scale.f);
    bounded(what + " B", c.b * scale.b);
    bounded(what + " I", c.i * scale.i);
    bounded(what + " W", c.w * scale.w);
  }
  if (!c.stage_memory.empty() && c.stage_memory.size() != static_cast<std::size_t>(num_stages))
    throw InputError(prefix + "activation sizes are given for " +
                     std::to_string(c.stage_memory.size()) + " stages, but the plan has " +
                     std::to_string(num_stages));
  for (double v : c.stage_memory)
    if (!std::isfinite(v) || v < 0)
      throw InputError(prefix + "activation sizes must be finite and non-negative");
  auto per_stage = [&](const std::vector<double>& values, const char* what) {
    if (!values.empty() && values.size() != static_cast<std::size_t>(num_stages))
      throw InputError(prefix + what + " are given for " + std::to_string(values.size()) +
                       " stages, but the plan has " + std::to_string(num_stages));
    for (double v : values) bounded(what, v);
  };
  per_stage(c.stage_input, "input sizes");
  per_stage(c.stage_recompute, "recompute times");
  bounded("host latency", c.host_latency);
  if (!std::isfinite(c.host_bandwidth) || c.host_bandwidth < 0)
    throw InputError(prefix + "host bandwidth " + cost_text(c.host_bandwidth) +
                     " must be a finite non-negative number (0: copies take the latency only)");
  // The largest copy: every stage holds 1 without per-stage sizes.
  double largest = c.stage_memory.empty() ? 1.0 : 0.0;
  for (double v : c.stage_memory) largest = std::max(largest, v);
  for (double v : c.stage_input) largest = std::max(largest, v);
  bounded("copy time (host latency + activation / host bandwidth)", c.copy_time(largest));
  check_length_growth(c, prefix, bounded);
}

}  // namespace pipeplan::detail
