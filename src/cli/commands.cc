#include "cli/commands.h"

namespace pipeplan::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"plan", "Plan a schedule, lower it, verify it and write it", setup_plan},
      {"verify", "Prove a plan file (JSON or CSV) deadlock-free", setup_verify},
      {"diagnose",
       "Hang replay: where a stuck run stopped, per rank, and who waits for whom (torch Flight "
       "Recorder dumps or a pipeplan trace)",
       setup_diagnose},
      {"show", "Show a plan file as an ASCII timeline", setup_show},
      {"list", "List the schedules with their constraints", setup_list},
      {"train", "Train a demo MLP pipelined by a plan (LibTorch executor)", setup_train},
      {"simulate", "Simulate a plan under a cost model: makespan, bubble, peak memory",
       setup_simulate},
      {"render", "Draw a simulated plan: SVG, Chrome trace (Perfetto) or text timeline",
       setup_render},
      {"compare", "Simulate several schedules on one shape, side by side", setup_compare},
      {"lower", "Insert SEND/RECV into a compute-only plan file (torch CSV or JSON)", setup_lower},
      {"convert", "Convert a plan file between json, csv (torch) and text", setup_convert},
      {"calibrate", "Measured per-stage costs of a traced run, for simulate --stage-costs",
       setup_calibrate},
      {"search", "Find the fastest verified plan for a layer profile under a memory budget",
       setup_search},
      {"export",
       "Write a plan for a trainer: torchtitan (schedule CSV + its config) or Megatron-LM "
       "(layout and flags)",
       setup_export},
      {"profile", "Analytic layer profile of a transformer (llama, gpt, moe) for --layers",
       setup_profile},
      {"bench", "Time every pass at scale: throughput, memory, scaling (docs/performance.md)",
       setup_bench},
  };
  return table;
}

}  // namespace pipeplan::cli
