// pipeplan CLI entry point: the one catch point mapping errors to exit codes.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "ir/edit_distance.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/version.h"

namespace {

using namespace pipeplan::cli;

// "unknown command 'plam' (did you mean 'plan'?)" before CLI11 sees it.
int unknown_command(const std::string& name) {
  std::string best, names;
  std::size_t best_d = 3;
  for (const auto& c : commands()) {
    names += (names.empty() ? "" : ", ") + c.name;
    std::size_t d = pipeplan::detail::edit_distance(name, c.name);
    if (d < best_d) best_d = d, best = c.name;
  }
  std::cerr << "pipeplan: error: unknown command '" << pipeplan::limits::excerpt(name) << "'";
  if (!best.empty()) std::cerr << " (did you mean '" << best << "'?)";
  std::cerr << "; commands: " << names << "\n";
  return kExitUsage;
}

// "unknown option '--bogus-flag' for 'plan' (did you mean '--rank'?)" when
// the command line holds an argument nobody took; kExitOk when none.
int unexpected_arguments(const CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> rest = app.remaining(true);
  if (rest.empty()) return kExitOk;
  const std::string& arg = rest.front();
  const CLI::App* sub = nullptr;
  for (int i = 1; i < argc && !sub; ++i)
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == argv[i]) sub = s;
  const std::string where = sub ? " for '" + sub->get_name() + "'" : std::string();
  if (arg.empty() || arg[0] != '-') {
    std::cerr << "pipeplan: error: unexpected argument '" << pipeplan::limits::excerpt(arg) << "'"
              << where << "\n";
    return kExitUsage;
  }
  const std::string name = arg.substr(0, arg.find('='));
  std::string best;
  std::size_t best_d = 3;
  for (const CLI::App* a : {sub, &app}) {
    if (!a) continue;
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& l : o->get_lnames())
        if (std::size_t d = pipeplan::detail::edit_distance(name, "--" + l); d < best_d)
          best_d = d, best = "--" + l;
      for (const std::string& sn : o->get_snames())
        if (std::size_t d = pipeplan::detail::edit_distance(name, "-" + sn);
            d < best_d && name.size() <= 3)
          best_d = d, best = "-" + sn;
    }
  }
  std::cerr << "pipeplan: error: unknown option '" << pipeplan::limits::excerpt(name) << "'"
            << where;
  if (!best.empty()) std::cerr << " (did you mean '" << best << "'?)";
  std::cerr << "; see 'pipeplan " << (sub ? sub->get_name() + " " : std::string()) << "--help'\n";
  return kExitUsage;
}

int run(int argc, char** argv) {
  CLI::App app{"pipeplan: generate, verify, inspect and replay pipeline-parallel schedules"};
  app.set_version_flag("--version", std::string("pipeplan ") + pipeplan::kVersion);
  bool quiet = false, verbose = false;
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");
  app.add_flag("--verbose", verbose, "Debug logging on stderr");
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 ok, 1 plan invalid or not deadlock-free, 2 usage or input error, 3 internal "
      "error,\n"
      "4 a peer failed or communication broke (train).\n"
      "Run with no command for a default 1f1b pp=4 m=8 plan. 'pipeplan COMMAND --help' for "
      "details.");

  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto& c : commands()) known = known || c.name == argv[1];
    if (!known) return unknown_command(argv[1]);
  }

  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (const auto& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    // Global flags (-q, --verbose) may also follow the command.
    sub->fallthrough();
    runners.emplace_back(sub, c.setup(*sub));
  }
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 checks required options before it complains about arguments it
    // did not recognise; name the unknown one first ("plan --bogus-flag"
    // is a typo, not a missing --schedule).
    if (e.get_exit_code() != 0)
      if (int rc = unexpected_arguments(app, argc, argv); rc != kExitOk) return rc;
    if (e.get_exit_code() == 0)
      return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help, --version
    // A bad value ("--pp: 'x' is not an integer") in the form of every other
    // error, pointing at the command's help.
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : app.get_subcommands()) sub = s;
    std::string what = e.what();
    if (what.size() > 240)
      what = what.substr(0, 240) + "... (" + std::to_string(what.size()) + " bytes)";
    for (char& c : what)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    std::cerr << "pipeplan: error: " << what << "; see 'pipeplan "
              << (sub ? sub->get_name() + " " : std::string()) << "--help'\n";
    return kExitUsage;
  }
  if (int rc = unexpected_arguments(app, argc, argv); rc != kExitOk) return rc;

  auto logger = spdlog::stderr_color_mt("pipeplan");
  logger->set_pattern("pipeplan: %l: %v");
  logger->set_level(quiet     ? spdlog::level::err
                    : verbose ? spdlog::level::debug
                              : spdlog::level::info);
  spdlog::set_default_logger(logger);

  for (auto& [sub, fn] : runners)
    if (sub->parsed()) return fn();
  // No subcommand: the default demo (1f1b pp=4 m=8: plan, verify, show).
  for (auto& [sub, fn] : runners)
    if (sub->get_name() == "plan") {
      CLI::App demo;
      auto demo_run = setup_plan(demo);
      demo.parse("-s 1f1b -p 4 -m 8 -f timeline", false);
      return demo_run();
    }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  set_raw_args(argc, argv);
  return guarded([&] { return run(argc, argv); });
}
