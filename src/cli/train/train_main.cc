// pipeplan-train: the LibTorch half of `pipeplan train`. `pipeplan train ARGS`
// execs `pipeplan-train ARGS`, so only training pays LibTorch's start-up.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"

int main(int argc, char** argv) {
  using namespace pipeplan::cli;
  set_raw_args(argc, argv);
  // stdout carries the "step <k> loss <v>" lines: the log goes to stderr.
  auto logger = spdlog::stderr_color_mt("pipeplan");
  logger->set_pattern("pipeplan: %l: %v");
  spdlog::set_default_logger(logger);
  return guarded([&] {
    CLI::App app{"pipeplan train: replay a plan on LibTorch + c10d and train a demo MLP"};
    std::function<int()> run = setup_train(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      int rc = app.exit(e);
      return rc == 0 ? kExitOk : kExitUsage;
    }
    return run();
  });
}
