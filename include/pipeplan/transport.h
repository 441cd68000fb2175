// How P2P operations complete: the transport model a plan is proved and
// simulated under (docs/semantics.md). Below the passes: lower, verify and
// simulate all read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pipeplan {

/// How P2P operations complete (docs/semantics.md).
enum class Transport : std::uint8_t {
  Rendezvous,  ///< one in-order stream per rank pair (NCCL P2P)
  Eager,       ///< sends buffered; a receive completes once its send is posted
  Serial,      ///< one in-order stream per rank for every peer
};
/// "rendezvous", "eager" or "serial".
std::string_view to_string(Transport t);
/// The inverse of to_string; nullopt for anything else.
std::optional<Transport> parse_transport(std::string_view s);

}  // namespace pipeplan
