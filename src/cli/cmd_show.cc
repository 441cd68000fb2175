// pipeplan show: a plan file as an ASCII timeline.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/emit.h"
#include "pipeplan/io.h"

namespace pipeplan::cli {

std::function<int()> setup_show(CLI::App& app) {
  struct ShowArgs {
    std::string file;
    CsvReadOptions csv;
  };
  auto args = std::make_shared<ShowArgs>();
  app.add_option("file", args->file, "Plan file (JSON or CSV), or - for stdin")->required();
  add_csv_options(app, args->csv);
  return [args]() {
    Plan plan = load_plan(args->file, args->csv);
    write_timeline(plan, std::cout);
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
