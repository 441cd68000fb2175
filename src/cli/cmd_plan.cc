// pipeplan plan: plan, lower, verify and write a schedule.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/lower_options.h"
#include "cli/runtime_option.h"
#include "cli/sim_options.h"
#include "cli/torch_target.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

namespace {
struct PlanArgs {
  Problem problem;
  int rank = 0;
  CLI::Option* rank_opt = nullptr;
  bool compute_only = false;
  bool no_verify = false;
  std::string format = "json";
  std::string output;
  std::string torch_version;
  std::string runtime;
  CostArgs costs;
  LoweringChoice lowering;
  MemoryArgs memory;
};
}  // namespace

std::function<int()> setup_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  add_problem_options(app, args->problem, true);
  args->rank_opt = app.add_option("-r,--rank", args->rank, "Emit only this rank's program")
                       ->check(integer_in(0, limits::kMaxRanks - 1));
  app.add_flag("--compute-only", args->compute_only, "Emit the compute order without SEND/RECV");
  app.add_flag("--forward-only", args->problem.forward_only,
               "Plan inference: each rank's forwards in the schedule's order, no backward");
  app.add_flag("--no-verify", args->no_verify, "Skip the rendezvous deadlock proof");
  app.add_option("-f,--format", args->format,
                 "Output format (torch-csv: strictly torch's dialect, no BATCH_P2P groups nor "
                 "memory actions)")
      ->check(CLI::IsMember({"json", "csv", "torch-csv", "text", "timeline"}));
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  add_torch_version_option(app, args->torch_version, to_string(kTorchDefaultVersion));
  add_runtime_option(app, args->runtime,
                     "the plan is proved under it instead of the bare rendezvous model, and "
                     "lowered serial-safe when the schedule's own lowering is refused there "
                     "(exit 1 when that is refused too)");
  add_cost_options(app, args->costs, true, /*model=*/false);
  add_lowering_options(app, args->lowering);
  add_memory_options(app, args->memory);
  return [args, &app]() {
    refuse_lowering_with_compute_only(app);
    const TorchTarget torch = torch_csv_target(args->format, args->torch_version, args->runtime);
    const std::vector<Runtime> under = proof_runtimes(args->format, torch, args->runtime);
    const MemoryPolicy memory = memory_policy(args->memory);
    // One schedule lookup: the shape, the lowering (for the cost model
    // given, else the nominal one; with --layers, the profile's stage sums
    // on the balanced partition, which the plan records) and the plan all
    // come from it.
    const Planner planner(args->problem);
    SimOptions costs = make_sim_options(args->costs);
    costs.costs.check_lengths(planner.meta().num_microbatches);
    Partition partition;
    if (const std::optional<LayerProfile> layers = load_layers(args->costs))
      partition = apply_layers(*layers, planner.meta(), costs);
    const LowerOptions lowering =
        planner.lowering(lowering_choice(args->lowering, args->costs), costs.costs);
    // The memory policy goes into the compute order, which is then lowered.
    Plan whole = apply_memory_policy(planner.compute(), memory);
    if (!args->compute_only) {
      if (under.empty() || args->no_verify) {
        whole = lower(whole, lowering);
      } else {
        const Plan compute = std::move(whole);
        whole = lower_for([&](const LowerOptions& o) { return lower(compute, o); }, lowering, under,
                          given_lowering_option(app).empty(), "the planned schedule");
      }
    }
    whole.meta.partition = partition;
    spdlog::debug("planned {} p={} m={} v={}: {} actions", whole.meta.schedule,
                  whole.meta.pp_degree, whole.meta.num_microbatches, whole.meta.stages_per_rank,
                  whole.num_actions());
    if (!args->no_verify) {
      // A compute-only plan is proven through its lowering: the order users
      // get is the one a runtime will lower the same way. (A plan with comms
      // is proven in place: at scale a copy would cost as much as lowering.)
      const VerifyResult res = prove(whole, {Transport::Rendezvous}, lowering).results.front();
      if (!res.ok()) {
        spdlog::error("the planned schedule is not deadlock-free (a pipeplan bug):\n{}",
                      format_diagnostics(res.diagnostics));
        return kExitInternal;
      }
      if (args->compute_only)
        if (std::optional<RuntimeRefusal> r = first_refusal(whole, under, lowering))
          reject_under(*r, "the planned schedule, lowered as its runtime would,");
      spdlog::debug("verified: deadlock-free under rendezvous");
    }
    const std::size_t n_actions = whole.num_actions();
    // --rank: that rank's program, moved out of the whole plan.
    if (args->rank_opt->count() > 0) whole = keep_rank(std::move(whole), args->rank, "--rank");
    std::ostringstream text;  // a refused write leaves no output file behind
    write_plan(whole, args->format, text, torch.version);
    if (args->format == "torch-csv") check_torch_target(whole, torch);  // written: whole
    if (args->format == "timeline" && !args->no_verify)
      text << "verified: deadlock-free under "
           << (args->runtime.empty() ? "rendezvous transport"
                                     : "runtime " + std::string(runtime_named(args->runtime).name))
           << " (" << n_actions << " actions" << (args->compute_only ? " after lowering" : "")
           << ")\n";
    Output o(args->output);
    o.stream() << text.str();
    o.close();
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
