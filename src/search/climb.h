// Internal to src/search: the one hill climb over a partition's boundaries,
// shared by the list-scheduled seeds (candidates.cc), a fixed plan
// (refine.cc) and the memory phase (memory_phase.cc); each says what a
// move must achieve to be kept.
#pragma once

#include <cstddef>

#include "pipeplan/profile.h"

namespace pipeplan::detail {

/// Hill-climbs `part` one layer across one boundary at a time. Each round
/// offers `keep` the neighbours in order (boundary by boundary, a layer to
/// the left, then to the right; none leaves a stage empty) until it keeps
/// one (returns true), which becomes `part`. Ends after `rounds` rounds, after
/// a round that kept none, or when `stop()` (asked before each round and each
/// boundary). Returns the number of moves kept.
template <class Keep, class Stop>
int climb_partition(Partition& part, int rounds, const Stop& stop, const Keep& keep) {
  int kept = 0;
  for (int round = 0; round < rounds && !stop(); ++round) {
    bool improved = false;
    for (std::size_t b = 0; b + 1 < part.size() && !improved && !stop(); ++b)
      for (int dir : {-1, 1}) {
        Partition next = part;
        next[b] += dir;
        next[b + 1] -= dir;
        if (next[b] < 1 || next[b + 1] < 1) continue;
        if (keep(next)) {
          part = next;
          improved = true;
          ++kept;
          break;
        }
      }
    if (!improved) break;
  }
  return kept;
}

}  // namespace pipeplan::detail
