// pipeplan show: a plan file as an ASCII timeline.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/emit.h"

namespace pipeplan::cli {

std::function<int()> setup_show(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  app.add_option("file", *file, "Plan file (JSON or CSV), or - for stdin")->required();
  return [file]() {
    Plan plan = load_plan(*file);
    write_timeline(plan, std::cout);
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
