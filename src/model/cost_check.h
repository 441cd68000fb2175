// Internal: the one check of a cost model, shared by lower(), simulate() and
// the cost options' reader.
#pragma once

#include <string>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// Throws InputError (prefixed with `prefix`) unless every duration the model
/// can produce is a number in 0..limits::kMaxCost (per-type costs, each
/// stage's scaled costs, latency + bytes / bandwidth) and every stage it
/// scales is in 0..num_stages-1, and microbatch lengths keep them so (a
/// length ratio up to limits::kMaxLengthRatio). Within those bounds no sum over a plan of at
/// most limits::kMaxActions actions overflows: a makespan is never inf and a
/// bubble never nan.
void check_costs(const CostModel& c, int num_stages, const std::string& prefix = "");

/// Throws InputError naming the first action of `plan` whose duration the
/// model lacks: a compute type a calibration could not measure
/// (CostModel::unmeasured), never costed as 0. Free when nothing is unmeasured.
void check_measured(const CostModel& c, const Plan& plan);

/// A cost or time as messages quote it ("%g": 0.25, 1e+12).
std::string cost_text(double v);

}  // namespace pipeplan::detail
