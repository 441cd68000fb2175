// How P2P operations complete: the transport models a plan is proved and
// simulated under, and the runtimes people run, each a row naming its model
// and its rules (docs/semantics.md). Below the passes: lower, verify and
// simulate all read it. The tables here are the one place a model or a
// runtime is added: the CLI's choices, `--model all`, `--runtime list` and
// the Python module's messages read them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan {

/// How P2P operations complete (docs/semantics.md). The value indexes
/// kTransportModels.
enum class Transport : std::uint8_t {
  Rendezvous,  ///< one in-order stream per rank pair (NCCL P2P)
  Eager,       ///< sends buffered; a receive completes once its send is posted
  Serial,      ///< one in-order stream per rank for every peer
};

/// A transport model: its name and the policy the execution core runs it
/// with (run/core.h).
struct TransportModel {
  Transport id;
  std::string_view name;
  /// One line for help texts and `--runtime list`.
  std::string_view summary;
  /// A send completes when posted; a receive once its match was (no
  /// streams): eager.
  bool buffered_sends;
  /// Every unit of a rank, to any peer, on the rank's one in-order stream:
  /// serial. Otherwise single operations run on their pair's stream.
  bool one_stream_per_rank;
};

inline constexpr std::array<TransportModel, 3> kTransportModels{{
    {Transport::Rendezvous, "rendezvous",
     "one in-order stream per rank pair; a group on its rank's stream for groups", false, false},
    {Transport::Eager, "eager", "sends complete when posted; a receive once its send was posted",
     true, false},
    {Transport::Serial, "serial", "every operation of a rank on one in-order stream", false, true},
}};

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kTransportModels.size(); ++i)
    if (static_cast<std::size_t>(kTransportModels[i].id) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kTransportModels: one row per Transport, in its order");

/// The row of `t`.
constexpr const TransportModel& transport_model(Transport t) {
  return kTransportModels[static_cast<std::size_t>(t)];
}
/// Whether sends complete when posted under `t` (eager).
constexpr bool buffered_sends(Transport t) { return transport_model(t).buffered_sends; }
/// Whether all of a rank's operations share one stream under `t` (serial).
constexpr bool one_stream_per_rank(Transport t) { return transport_model(t).one_stream_per_rank; }

/// "rendezvous", "eager" or "serial".
std::string_view to_string(Transport t);
/// The inverse of to_string; nullopt for anything else.
std::optional<Transport> parse_transport(std::string_view s);
/// Every model's name, in table order, joined by `sep` ("rendezvous, eager,
/// serial"); `last` joins the last two when given ("rendezvous, eager or serial").
std::string transport_names(std::string_view sep = ", ", std::string_view last = {});

/// Where a rank waits for a single SEND/RECV it posted.
enum class Waits : std::uint8_t {
  BeforeUse,  ///< posted and left: a receive waited before the compute that reads it
  AtPost,     ///< posted and waited where it stands (a blocking call, a commit-and-wait)
};

/// What a runtime adds to its transport model (docs/semantics.md).
struct RunRules {
  Waits waits = Waits::BeforeUse;
  /// BATCH_P2P groups run on a communicator of their own (NCCL coalescing on
  /// the process group's communicator) and single operations on their
  /// pair's, so a group member never meets a single ("group-meets-single").
  bool groups_apart = true;
  bool operator==(const RunRules& o) const {
    return waits == o.waits && groups_apart == o.groups_apart;
  }
};

/// A runtime people run: which model it is and how it waits, each
/// re-derived from the runtime's own source (`source`).
struct Runtime {
  std::string_view name;
  /// Other names find_runtime() takes for it (e.g. "dualpipev").
  std::vector<std::string_view> aliases;
  Transport model;
  RunRules rules;
  /// One line: what runs this way.
  std::string_view summary;
  /// The source the row was derived from (package, version, file).
  std::string_view source;
};

/// The runtimes, in the order `verify --runtime list` prints them.
const std::vector<Runtime>& runtimes();
/// The runtime named `name`; nullopt for anything else.
std::optional<Runtime> find_runtime(std::string_view name);
/// find_runtime(), throwing InputError naming the runtimes for an unknown name.
const Runtime& runtime_named(std::string_view name);
/// Every runtime's name, in table order, joined by ", ".
std::string runtime_names();

}  // namespace pipeplan
