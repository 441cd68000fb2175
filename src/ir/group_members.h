// Internal: the one test of "a member twice in one BATCH_P2P group", shared by
// the cell reader (io/cell_text.cc) and the group validator
// (first_bad_group()). Hashed: a group of n members costs O(n), not O(n^2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_set>

#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// The members of one group seen so far, as (kind, stage, microbatch).
class GroupMembers {
 public:
  /// Adds `a`; false when a member of the same kind, stage and microbatch
  /// was added before.
  bool add(const Action& a) { return seen_.insert(Key{a.type, a.stage, a.microbatch}).second; }

 private:
  struct Key {
    ActionType type;
    std::int32_t stage, microbatch;
    bool operator==(const Key& o) const {
      return type == o.type && stage == o.stage && microbatch == o.microbatch;
    }
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      const std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.stage)) << 32 |
                               static_cast<std::uint32_t>(k.microbatch)) *
                                  0x9e3779b97f4a7c15ull ^
                              static_cast<std::uint64_t>(k.type);
      return std::hash<std::uint64_t>{}(x);
    }
  };
  std::unordered_set<Key, Hash> seen_;
};

}  // namespace pipeplan::detail
