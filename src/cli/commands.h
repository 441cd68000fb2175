// The one subcommand table of the CLI.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace pipeplan::cli {

/// A subcommand: `setup` adds its options to `app` and returns the function
/// main() runs after parsing (returning the exit code).
struct Command {
  std::string name;
  std::string description;
  std::function<std::function<int()>(CLI::App& app)> setup;
};

/// Every subcommand, in help order.
const std::vector<Command>& commands();

std::function<int()> setup_plan(CLI::App& app);
std::function<int()> setup_verify(CLI::App& app);
std::function<int()> setup_show(CLI::App& app);
std::function<int()> setup_list(CLI::App& app);
std::function<int()> setup_train(CLI::App& app);
std::function<int()> setup_simulate(CLI::App& app);
std::function<int()> setup_render(CLI::App& app);
std::function<int()> setup_compare(CLI::App& app);
std::function<int()> setup_lower(CLI::App& app);
std::function<int()> setup_convert(CLI::App& app);
std::function<int()> setup_bench(CLI::App& app);
std::function<int()> setup_calibrate(CLI::App& app);
std::function<int()> setup_search(CLI::App& app);
std::function<int()> setup_export(CLI::App& app);
std::function<int()> setup_profile(CLI::App& app);
std::function<int()> setup_diagnose(CLI::App& app);

}  // namespace pipeplan::cli
