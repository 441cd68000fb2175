// One training step's plan for microbatches of different lengths
// (docs/lengths.md): the fast per-step path that picks a library schedule
// and the microbatch order for the step's lengths, and the construction of
// microbatches from the step's sequences under a token budget.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"

namespace pipeplan {

/// What a step needs planned.
struct StepRequest {
  int pp_degree = 1;
  /// Tokens of each microbatch in arrival order; or, when empty,
  /// `sequences` packed into microbatches of at most `microbatch_tokens`.
  std::vector<double> lengths;
  std::vector<double> sequences;
  double microbatch_tokens = 0.0;
  /// The model's layers (stage costs on each schedule's balanced
  /// partition); without one, `costs`' base costs per stage.
  std::optional<LayerProfile> layers;
  /// Base costs (without a profile), transfers and copies.
  CostModel costs;
  Transport transport = Transport::Rendezvous;
  /// Per-rank peak activation memory allowed; unset: no limit.
  std::optional<double> memory_limit;
  /// Library schedules tried (names or aliases); empty: 1f1b,
  /// interleaved-1f1b (v = 2), zb-h1, zbv, v-half.
  std::vector<std::string> schedules;
  /// Keep the arrival order (only the schedule is chosen).
  bool keep_order = false;
};

/// The chosen plan for the step.
struct StepPlan {
  Plan plan;  ///< lowered and verified under the request's transport
  /// Plan microbatch k is input microbatch microbatch_order[k] (with
  /// sequences: the constructed microbatch k of `microbatches`).
  std::vector<int> microbatch_order;
  /// With sequences: each plan microbatch's sequence indices (into the
  /// request's `sequences`), in plan order; empty otherwise.
  std::vector<std::vector<int>> microbatches;
  std::vector<double> lengths;  ///< tokens of each plan microbatch, in plan order
  SimOptions options;           ///< the cost model the plan was timed with (plan order)
  double makespan = 0.0, peak_memory = 0.0;
  std::string schedule;
  std::string order_rule;  ///< which order won: "arrival", "longest first", ...
  int candidates = 0;      ///< plans built and simulated
  /// With sequences: the best makespan of first-fit-decreasing packing
  /// into the same budget run by the same schedules in arrival order.
  std::optional<double> first_fit_makespan;
};

/// Plans the step: for each schedule that takes the shape and each order
/// rule (arrival; longest first; shortest first; longest in the middle),
/// plans, lowers and simulates at the step's lengths, keeps the fastest
/// that fits the memory limit, and verifies it. With sequences, the
/// microbatches are built first (pack_sequences). Throws InputError for a
/// bad request and BudgetError-like InputError when nothing fits.
StepPlan plan_step(const StepRequest& request);

/// The tokens of each group's sequences (for CostModel::set_sequences):
/// groups of indices into `sequences`.
std::vector<std::vector<double>> packed_tokens(const std::vector<double>& sequences,
                                               const std::vector<std::vector<int>>& groups);

/// Packs sequences (tokens each) into microbatches of at most `budget`
/// tokens, first fit decreasing: the longest first, each into the first
/// microbatch with room. Returns each microbatch's sequence indices.
/// Throws InputError for a sequence longer than the budget.
std::vector<std::vector<int>> first_fit_decreasing(const std::vector<double>& sequences,
                                                   double budget);

/// Packs sequences knowing the pipeline (DynaPipe's idea): sorted by
/// length, cut into contiguous groups of at most `budget` tokens so as to
/// minimise sum(t) + (stages - 1) x max(t) over the groups, t a group's
/// time through the slowest stage (`stage_cost(tokens, squares)`, squares
/// the sum of its sequences' squared tokens), by a dynamic programme for
/// each of up to 17 caps on max(t). Returns each microbatch's sequence
/// indices. Throws InputError for a sequence longer than the budget.
std::vector<std::vector<int>> pipeline_packing(
    const std::vector<double>& sequences, double budget, int stages,
    const std::function<double(double tokens, double squares)>& stage_cost);

}  // namespace pipeplan
