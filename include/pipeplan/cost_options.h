// The simulator's cost options as users give them (the CLI's --cost,
// --stage-costs, --comm, --bytes and --model; the Python module's keywords).
// One home, so every front end means the same thing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/simulate.h"

namespace pipeplan {

/// Cost options as text, each empty/unset when not given.
struct CostOptions {
  std::string cost;                                  ///< "F=1,B=2,..." (parse_cost_spec)
  std::optional<std::string> stage_costs;            ///< contents of a stage-costs file
  std::string stage_costs_source = "<stage-costs>";  ///< its name in messages
  std::string comm;                                  ///< "LATENCY[,BANDWIDTH]"
  double bytes = 0;                                  ///< size of every transfer
  /// The copy stream of memory actions (docs/memory.md): activation units
  /// per time unit (a positive number; "" = infinite) and the latency of
  /// each copy ("" = 0).
  std::string host_bw, host_latency;
  std::string model = "rendezvous";  ///< rendezvous | eager | serial
  /// Tokens of each microbatch, in microbatch order (parse_lengths; empty:
  /// every microbatch at the length the costs are stated at).
  std::vector<double> lengths;
  /// Put before an option's name in messages: "" names them as the library
  /// and the Python keywords do ("comm latency 'x' ..."); the CLI sets "--".
  std::string name_prefix;
};

/// The SimOptions the options describe. A calibrated stage-costs file
/// (absolute durations) sets the base costs to 1 (`cost` multiplies them) and
/// brings its transfer cost unless `comm`/`bytes` say otherwise. Throws
/// InputError naming the option ("comm latency 'x' is not a non-negative
/// number", with `name_prefix` in front). `file`, when given, receives the stage-costs
/// file as read.
SimOptions make_sim_options(const CostOptions& options, StageCosts* file = nullptr);

}  // namespace pipeplan
