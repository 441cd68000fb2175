// lower(): insert SEND/RECV into a compute-only plan.
//
// Two lowerings share one entry point (docs/verification.md, "Lowering"):
//  - LowerMode::LatencyHiding (the default): plans for the durations in
//    `costs` (per type and stage, transfer latency and bandwidth x bytes).
//    Each pair's transfers are ordered as a one-at-a-time pair stream
//    would take them, earliest deadline (the consumer's latest start) first
//    among those ready, sends follow their producer at once, and receives
//    are posted as early as the pair order and `max_prefetch` allow, so
//    transfer latency overlaps compute.
//  - LowerMode::Seed: the seed driver's order (receives right before their
//    consumer; pairs ordered by consumer start in a unit-cost run). gpipe and
//    1f1b use it by default; it is the "before" of the latency-hiding one.
// With `batch_p2p`, the seed placement with one transfer order per rank, and
// a rank's send posted together with the receive from the same peer it meets
// as one BATCH_P2P group (Megatron-LM's batch_isend_irecv), where the other
// lowerings parity-stagger or delay one end's send.
//
// @code
//   LowerOptions o = default_lowering("interleaved-1f1b");  // planner.h
//   o.costs.comm_latency = 0.25;     // what the transfers cost on your links
//   o.max_prefetch = 4;              // at most 4 receive buffers waiting
//   Plan p = lower(plan_compute(problem), o);
// @endcode
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"

namespace pipeplan {

/// Transfer latency (in units of one forward) that a lowering plans for when
/// the caller gives no communication cost: small but not free.
inline constexpr double kNominalLatency = 0.25;

/// Where a forward send goes once its producer ran (Seed mode only; the
/// latency-hiding lowering always sends right after the producer).
enum class SendPlacement : std::uint8_t {
  Earliest,         ///< right after the producer (or the pair's previous transfer)
  ParityStaggered,  ///< odd ranks ship a forward output just before their next compute
};

/// Which algorithm places the transfers.
enum class LowerMode : std::uint8_t {
  LatencyHiding,  ///< prefetched receives, pair order from the cost model
  Seed,           ///< receives right before their consumer (the seed's order)
  /// Latency hiding with each pair's order from an exact search where the
  /// eager bound is missed (within a work limit: see LowerReport).
  Exact,
};
std::string_view to_string(LowerMode m);
/// "latency-hiding" / "seed" / "exact"; nullopt for anything else.
std::optional<LowerMode> parse_lower_mode(std::string_view s);
/// The names parse_lower_mode() takes, for messages: "latency-hiding, seed or exact".
std::string_view lower_mode_names();

/// The cost model a lowering plans for when none is given: unit compute
/// costs (F=1, B=2, I=W=1) and kNominalLatency per transfer.
CostModel nominal_costs();

struct LowerOptions {
  LowerMode mode = LowerMode::LatencyHiding;
  SendPlacement send_placement = SendPlacement::Earliest;
  /// Durations to plan for: compute per type and stage (stage_scales) and
  /// transfers (comm_latency + transfer_bytes / comm_bandwidth). Seed mode
  /// reads the per-type compute costs only.
  CostModel costs = nominal_costs();
  /// Latency hiding: most receives a rank holds posted before their consumer
  /// ran (buffers allocated, data not yet used); at least the inputs of one
  /// compute (2 for an OVERLAP_F_B). 0: no limit. With a cap, pairs order
  /// their transfers by consumer start (deadline) rather than readiness.
  int max_prefetch = 0;
  /// Keep one transfer order per rank across all its peers (not just per
  /// pair), which also makes the plan progress under the serial model.
  bool serial_safe = false;
  /// The batched lowering (Megatron-LM's batch_p2p_comm): the seed placement,
  /// serial-safe, with every send and the receive from the same peer it
  /// meets as one BATCH_P2P group on both ends. `mode`, `send_placement`,
  /// `serial_safe` and `max_prefetch` are not read.
  bool batch_p2p = false;
};

/// What a latency-hiding (or exact) lowering found about its transfer
/// orders, under the costs it planned for (LowerOptions::costs).
struct LowerReport {
  /// How each rank pair's transfer order was chosen.
  enum class Orders : std::uint8_t {
    Unsearched,  ///< seed lowering, a prefetch cap or serial-safe: not compared
    Bound,       ///< the orders reach the eager bound: no lowering is faster
    Local,       ///< bound missed; no single swap of adjacent transfers on a pair helps
    Optimal,     ///< bound missed; an exact search proved no pair orders are faster
    Limited,     ///< bound missed; the search stopped at its work limit (or skipped a large plan)
  };
  Orders orders = Orders::Unsearched;
  double bound = 0.0;     ///< the eager bound: values move the moment they are made
  double makespan = 0.0;  ///< the lowered plan's rendezvous makespan (0 when Unsearched)
};
std::string_view to_string(LowerReport::Orders o);

/// Precondition: `plan` is whole and compute-only, and its compute order is
/// consistent (every forward/backward dependency reachable without a cycle;
/// otherwise throws PlanRejected naming the stuck ranks); costs positive and
/// finite (InputError otherwise).
/// Postcondition: every cross-rank boundary has one SEND and one RECV before
/// its consumer and after its producer; each rank pair posts its transfers in
/// one common order, so the plan is deadlock-free under the rendezvous and
/// eager models (and serial with `serial_safe` or `batch_p2p`). With
/// `batch_p2p`, a group's members keep the ungrouped plan's order, so the
/// plan also progresses when they are posted one by one. Compute order is
/// unchanged.
/// Linear in the number of actions, plus the bounded search of
/// LowerMode::Exact and of latency hiding where the eager bound is missed
/// (docs/verification.md, "Lowering"). Exact throws InputError with a
/// prefetch cap or serial_safe.
Plan lower(const Plan& plan, const LowerOptions& options = {});
/// lower(), also saying how the transfer orders compare with the best.
Plan lower(const Plan& plan, const LowerOptions& options, LowerReport& report);

}  // namespace pipeplan
