// Internal: the order each rank pair's stream serves its transfers, from an
// event-driven run of the compute order with one stream per pair.
#pragma once

#include <cstdint>
#include <vector>

#include "lower/latency.h"
#include "pipeplan/costs.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// Runs `plan` (compute-only) with each rank's computes in list order under
/// `costs`, every transfer going through its pair's stream (`pair_of[id]`),
/// which carries one transfer at a time: whenever a stream is free it takes,
/// among the transfers whose producer ended, the one with the earliest
/// deadline (ties: key_less). Returns each pair's transfers in the order its
/// stream took them, as id << 1 | 1 when the transfer goes from the lower
/// rank to the higher (id << 1 otherwise), and sets `makespan` to when the
/// run's last compute ended (with each receive posted as early as these
/// orders allow, the lowered plan's rendezvous makespan). `xfers` of one
/// sending rank must be listed in producer order (ids ascending with the
/// producer index). Time O(n log p) for n actions and p ranks, plus O(log k)
/// per transfer for k ready at once. (The searches of order_search.h time
/// other orders on the execution core: stream_run.h.)
std::vector<std::vector<std::uint32_t>> serialized_pair_orders(
    const Plan& plan, const CostModel& costs, const std::vector<Xfer>& xfers,
    const std::vector<std::uint32_t>& pair_of, int n_pairs, double& makespan);

}  // namespace pipeplan::detail
