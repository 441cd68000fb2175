// Internal: the identity of a transfer and a prefetch hint, used by the
// verifier's progress run.
#pragma once

#include <cstddef>

#include "pipeplan/ir.h"

namespace pipeplan::detail {

constexpr std::size_t kPrefetchAhead = 12;  // actions (about four cache lines)

inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

// Payload identity of a transfer: direction, sending stage, microbatch.
struct Payload {
  bool grad = false;
  int send_stage = 0, mb = 0;
  bool operator==(const Payload& o) const {
    return grad == o.grad && send_stage == o.send_stage && mb == o.mb;
  }
};

inline Payload payload_of(const Action& a) {
  switch (a.type) {
    case ActionType::SendF: return {false, a.stage, a.microbatch};
    case ActionType::RecvF: return {false, a.stage - 1, a.microbatch};
    case ActionType::SendB: return {true, a.stage, a.microbatch};
    default: return {true, a.stage + 1, a.microbatch};  // RecvB
  }
}

}  // namespace pipeplan::detail
