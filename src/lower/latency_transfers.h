// Internal: the latency-hiding lowering's transfers (latency.cc, phase 1):
// every cross-rank value of a compute-only plan as one transfer, with its
// release (producer end in the bound's run) and deadline (consumer's latest
// start), listed per direction in key order.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "lower/latency.h"
#include "lower/producers.h"
#include "lower/timing.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail::hiding {

struct Dir {
  int src = 0, dst = 0;
  std::vector<std::uint32_t> ids;  // key order
};

// Phase 1: every cross-rank value of the plan as a transfer, released when
// its producer ends in the bound's run and due at its consumer's latest
// start; listed per direction (sending rank, receiving rank) in key order.
struct Transfers {
  std::vector<Xfer> xfers;
  std::vector<Dir> dirs;
  std::map<std::pair<int, int>, int> dir_ids;        // (src, dst) -> index into dirs
  std::vector<std::vector<int>> sends_of, recvs_of;  // per rank: its directions
  std::vector<std::int32_t> tid_f, tid_b;            // transfer id per sending (stage, mb), or -1
};

/// Phase 1 of the latency-hiding lowering: the transfers of `plan` timed by
/// `timing` (the bound's run) with `latest` (latest starts) as deadlines;
/// with a prefetch cap (`max_prefetch` > 0) each receive's earliest slot.
Transfers collect_transfers(const Plan& plan, const ProducerIndex& producers, const Timing& timing,
                            const std::vector<std::vector<double>>& latest, int max_prefetch);

}  // namespace pipeplan::detail::hiding
