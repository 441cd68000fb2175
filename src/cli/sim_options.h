// Options shared by simulate, render and compare: where the plan comes from
// and the cost model.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/lower_options.h"
#include "pipeplan/ir.h"
#include "pipeplan/planner.h"
#include "pipeplan/problem.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace CLI {
class App;
}

namespace pipeplan::cli {

/// --cost, --stage-costs, --layers, --comm, --bytes, --host-bw,
/// --host-latency, --model as given.
struct CostArgs {
  std::string cost;
  std::string layers;
  std::string stage_costs;
  std::string comm;
  double bytes = 0;
  std::string host_bw, host_latency;  ///< --host-bw, --host-latency (memory actions' copies)
  std::string model = "rendezvous";
  std::string lengths;  ///< --lengths L1,L2,...|FILE
};

/// Adds the cost-model options (`stage_costs`: whether --stage-costs exists;
/// `model`: whether --model does).
void add_cost_options(CLI::App& app, CostArgs& args, bool stage_costs = true, bool model = true);
/// Adds --lengths (also for commands without the other cost options).
void add_lengths_option(CLI::App& app, std::string& lengths);
/// Parses the cost options (reading --stage-costs FILE; a calibrated file
/// sets absolute durations and its transfer cost); throws InputError.
/// `file_out`, when given, receives the stage-costs file as read.
SimOptions make_sim_options(const CostArgs& args, StageCosts* file_out = nullptr);
/// The lowering `flags` choose (--lowering, --prefetch, --serial-safe),
/// with the transfer cost stated when --comm gives it.
LoweringChoice lowering_choice(LoweringChoice flags, const CostArgs& costs);
/// --lengths as tokens per microbatch: the list given, or FILE's
/// (parse_lengths); empty when not given. Throws InputError.
std::vector<double> read_lengths(const std::string& value, const std::string& option = "--lengths",
                                 const std::string& item = "microbatch");
/// Reads --layers FILE; nullopt when not given.
std::optional<LayerProfile> load_layers(const CostArgs& args);
/// Gives `options` the stage costs of `profile` split for `meta` (its
/// recorded partition, else the balanced one); returns that partition.
Partition apply_layers(const LayerProfile& profile, const PlanMeta& meta, SimOptions& options);

/// A plan FILE, or -s NAME -p P -m M [-v V].
struct PlanSource {
  std::string file;
  Problem problem;
  bool lower = false;         ///< lower a compute-only FILE first
  bool compute_only = false;  ///< drop SEND/RECV (-s: plan without lowering)
  LoweringChoice lowering;    ///< how -s plans and FILE --lower are lowered
  MemoryArgs memory;          ///< --recompute / --offload: inserted into the order
  CLI::App* app = nullptr;
};

/// Adds the positional FILE, -s/-p/-m/-v, --forward-only, --lower,
/// --compute-only, the lowering options and the memory policy's.
void add_plan_source(CLI::App& app, PlanSource& src);
/// Loads or plans the plan, lowering for the simulated cost model of
/// `costs`, or with `layers` for the profile's stage costs on the plan's
/// partition. A FILE's structural defects (check_structure; with --lower, a
/// compute order that cannot be lowered) land in `defects`, and the plan is
/// returned as read.
Plan load_plan_source(const PlanSource& src, const CostArgs& costs, const CostModel& model,
                      std::vector<Diagnostic>& defects, const LayerProfile* layers = nullptr);
/// Prints defects or simulation problems to stderr; returns kExitInvalid.
int report_invalid(const std::string& what, const std::vector<Diagnostic>& problems);

/// A loaded plan with its cost model and simulation result.
struct Simulated {
  Plan plan;
  SimOptions options;
  SimResult result;
  int exit_code = 0;  ///< non-zero: the plan had structural defects (reported)
};
/// Loads or plans the source and simulates it, warning when --model cannot
/// apply (compute-only plan). Structural defects are reported and set exit_code.
/// `before_simulating` sees the plan first (and may refuse it by throwing).
Simulated load_and_simulate(const PlanSource& src, const CostArgs& costs, const CLI::App& app,
                            const std::function<void(const Plan&)>& before_simulating = {});

}  // namespace pipeplan::cli
