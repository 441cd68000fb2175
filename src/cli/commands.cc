#include "cli/commands.h"

namespace pipeplan::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"plan", "Plan a schedule, lower it, verify it and write it", setup_plan},
      {"verify", "Prove a plan file (JSON or CSV) deadlock-free", setup_verify},
      {"show", "Show a plan file as an ASCII timeline", setup_show},
      {"list", "List the schedules with their constraints", setup_list},
      // --- further subcommands: one row each ---
      {"train", "Train a demo MLP pipelined by a plan (LibTorch executor)", setup_train},
  };
  return table;
}

}  // namespace pipeplan::cli
