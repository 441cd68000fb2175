// The cost model: per-type and per-stage durations and the transfer time.
#include "pipeplan/costs.h"

#include <algorithm>
#include <cmath>

#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

const StageScale kUnitScale{};

const StageScale& scale_of(const CostModel& c, int stage) {
  auto it = c.stage_scales.find(stage);
  return it == c.stage_scales.end() ? kUnitScale : it->second;
}

const StageScale kLinear{0.0, 0.0, 0.0, 0.0};

// How a cost of `stage` stated at the reference length grows to microbatch
// `mb`'s: r (1 - q) + r2 q, with r the length ratio, r2 the sum of its
// sequences' squared ratios (r^2 for one sequence) and q the part's
// quadratic fraction.
double grown(const CostModel& c, int stage, int mb, double StageScale::*part) {
  if (c.length_ratio.empty()) return 1.0;
  auto it = c.stage_quadratic.find(stage);
  const double q = (it == c.stage_quadratic.end() ? kLinear : it->second).*part;
  return c.ratio(mb) * (1.0 - q) + c.square(mb) * q;
}

double cost_of(const CostModel& c, double base, int stage, int mb, double StageScale::*part) {
  return base * scale_of(c, stage).*part * grown(c, stage, mb, part);
}

}  // namespace

double CostModel::duration(const Action& a) const {
  switch (a.type) {
    case ActionType::F: return cost_of(*this, f, a.stage, a.microbatch, &StageScale::f);
    case ActionType::B: return cost_of(*this, b, a.stage, a.microbatch, &StageScale::b);
    case ActionType::I: return cost_of(*this, i, a.stage, a.microbatch, &StageScale::i);
    case ActionType::W: return cost_of(*this, w, a.stage, a.microbatch, &StageScale::w);
    case ActionType::OverlapFB:
      if (overlap) return *overlap;
      return cost_of(*this, f, a.stage, a.microbatch, &StageScale::f) +
             cost_of(*this, b, a.sub_stage, a.sub_microbatch, &StageScale::b);
    case ActionType::Recompute:
      // A recompute re-runs the forward: it grows as F does.
      if (!stage_recompute.empty() && a.stage >= 0 &&
          static_cast<std::size_t>(a.stage) < stage_recompute.size())
        return stage_recompute[static_cast<std::size_t>(a.stage)] *
               grown(*this, a.stage, a.microbatch, &StageScale::f);
      return cost_of(*this, f, a.stage, a.microbatch, &StageScale::f);
    default: return 0.0;
  }
}

double CostModel::transfer_time() const { return transfer_time(-1); }

double CostModel::transfer_time(int mb) const {
  if (comm_bandwidth > 0 && transfer_bytes > 0)
    return comm_latency + transfer_bytes * ratio(mb) / comm_bandwidth;
  return comm_latency;
}

namespace {

void check_tokens(double tokens, const std::string& what) {
  if (!std::isfinite(tokens) || tokens <= 0 || tokens > limits::kMaxCost)
    throw InputError("the length of " + what + " (" + detail::format_number(tokens) +
                     ") is not a positive number of tokens up to 1e+12");
}

}  // namespace

void CostModel::set_lengths(std::vector<double> tokens, double stated) {
  std::vector<std::vector<double>> one_each;
  one_each.reserve(tokens.size());
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    check_tokens(tokens[k], "microbatch " + std::to_string(k));
    one_each.push_back({tokens[k]});
  }
  set_sequences(std::move(one_each), stated);
  microbatch_sequences.clear();
}

void CostModel::set_sequences(std::vector<std::vector<double>> sequences, double stated) {
  if (!std::isfinite(stated) || stated < 0)
    throw InputError("the stated sequence length must be a positive number of tokens, got " +
                     detail::format_number(stated));
  std::vector<double> tokens;
  double longest = 0.0;
  for (std::size_t k = 0; k < sequences.size(); ++k) {
    if (sequences[k].empty())
      throw InputError("microbatch " + std::to_string(k) + " holds no sequence");
    double sum = 0;
    for (double t : sequences[k]) {
      check_tokens(t, "a sequence of microbatch " + std::to_string(k));
      sum += t;
    }
    tokens.push_back(sum);
    longest = std::max(longest, sum);
  }
  const double reference = stated > 0 ? stated : longest;
  length_ratio.clear();
  square_ratio.clear();
  for (std::size_t k = 0; k < sequences.size(); ++k) {
    double squares = 0;
    for (double t : sequences[k]) squares += (t / reference) * (t / reference);
    length_ratio.push_back(tokens[k] / reference);
    square_ratio.push_back(squares);
  }
  microbatch_tokens = std::move(tokens);
  microbatch_sequences = std::move(sequences);
  stated_tokens = stated;
}

void CostModel::restate_lengths(double stated) {
  if (microbatch_tokens.empty()) return;
  if (microbatch_sequences.empty()) set_lengths(microbatch_tokens, stated);
  else set_sequences(microbatch_sequences, stated);
}

void CostModel::take_lengths(const CostModel& other) {
  microbatch_tokens = other.microbatch_tokens;
  stated_tokens = other.stated_tokens;
  length_ratio = other.length_ratio;
  square_ratio = other.square_ratio;
  microbatch_sequences = other.microbatch_sequences;
}

void CostModel::check_lengths(int num_microbatches) const {
  if (microbatch_tokens.empty() ||
      microbatch_tokens.size() == static_cast<std::size_t>(num_microbatches))
    return;
  throw InputError("lengths: " + std::to_string(microbatch_tokens.size()) +
                   " microbatch lengths given, but the plan has " +
                   std::to_string(num_microbatches) +
                   " microbatches (one length per microbatch, in microbatch order)");
}

bool CostModel::variable_lengths() const {
  for (double r : length_ratio)
    if (r != 1.0) return true;
  return false;
}

CostModel cost_model_of(const StageCosts& file) {
  CostModel c;
  c.stage_scales = file.stages;
  c.unmeasured = file.unmeasured;
  if (file.absolute) c.f = c.b = c.i = c.w = 1.0;
  if (file.comm_latency) c.comm_latency = *file.comm_latency;
  if (file.comm_bandwidth) c.comm_bandwidth = *file.comm_bandwidth;
  if (file.transfer_bytes) c.transfer_bytes = *file.transfer_bytes;
  return c;
}

}  // namespace pipeplan
