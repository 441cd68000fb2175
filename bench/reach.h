// Whether a compute order's eager bound is out of reach for every execution
// with one transfer stream per rank pair (NCCL point-to-point, the
// rendezvous model): the proof `pipeplan bench --latency` gives for each
// shape where the latency-hiding lowering misses the bound.
#pragma once

#include <optional>
#include <string>

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"

namespace pipeplan::bench {

/// A proof that no execution of `compute` (whole, compute-only) that carries
/// each rank pair's transfers one at a time, in either direction, finishes
/// by its eager bound under `costs` (every lowering's plans are such
/// executions): the reason, naming the transfers or the action whose
/// earliest start passes its latest. nullopt when none was found, which does
/// not prove the bound reachable.
///
/// The method: every action and transfer gets an earliest start (the eager
/// run's) and a latest start keeping the bound; two transfers of one pair
/// that cannot go in one order must go in the other, which raises the
/// second's earliest start and lowers the first's latest; the changes spread
/// along each rank's order and to the transfers' producers and consumers
/// until nothing moves. A window where an earliest start exceeds a latest
/// start, or two transfers fit in neither order, is the proof. Polynomial;
/// meant for benchmark-sized plans.
std::optional<std::string> bound_out_of_reach(const Plan& compute, const CostModel& costs);

}  // namespace pipeplan::bench
