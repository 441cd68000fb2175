// pipeplan-train: the LibTorch half of `pipeplan train`. `pipeplan train ARGS`
// execs `pipeplan-train ARGS`, so only training pays LibTorch's start-up.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/exec/log.h"

int main(int argc, char** argv) {
  using namespace pipeplan::cli;
  set_raw_args(argc, argv);
  // stdout carries the "step <k> loss <v>" lines: the log goes to stderr.
  pipeplan::exec::log_to_stderr("pipeplan");
  return guarded([&] {
    CLI::App app{"pipeplan train: replay a plan on LibTorch + c10d and train a demo MLP"};
    std::function<int()> run = setup_train(app);
    refuse_empty_values(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      int rc = app.exit(e);
      return rc == 0 ? kExitOk : kExitUsage;
    }
    return run();
  });
}
