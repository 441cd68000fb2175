// Internal: the batched lowering behind lower() (LowerOptions::batch_p2p).
#pragma once

#include "pipeplan/ir.h"
#include "pipeplan/lower.h"

namespace pipeplan::detail {

/// lower() with batch_p2p: the seed placement (receives right before their
/// consumer, sends right after their producer, one transfer order per rank),
/// then every send and the receive from the same peer it meets posted as one
/// BATCH_P2P group on both ends (group_meeting_transfers). Same
/// preconditions as lower().
Plan lower_batched(const Plan& plan, const LowerOptions& options);

/// Marks, on every rank, a SEND and a RECV with the same peer that sit next
/// to each other as one BATCH_P2P group when their partners on that peer sit
/// next to each other in the same order (the two ends meet: each group holds
/// the partner of the other's members). Members keep their order, so a
/// runtime posting them one by one sees the plan as before. Actions already
/// in a group stay as they are. Linear in the number of actions.
void group_meeting_transfers(Plan& plan);

}  // namespace pipeplan::detail
