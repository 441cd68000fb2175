// pipeplan list: the schedule table.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/planner.h"

namespace pipeplan::cli {

std::function<int()> setup_list(CLI::App& app) {
  auto verbose = std::make_shared<bool>(false);
  app.add_flag("-l,--long", *verbose, "Also print each schedule's description");
  return [verbose]() {
    for (const auto& s : schedules()) {
      std::string aliases;
      for (const auto& a : s.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
      std::string v;
      for (int x : s.allowed_stages_per_rank) v += (v.empty() ? "" : "|") + std::to_string(x);
      if (v.empty()) v = "any (default " + std::to_string(s.default_stages_per_rank) + ")";
      std::cout << s.name << "\n"
                << "  aliases:     " << aliases << "\n"
                << "  origin:      " << s.origin << "\n"
                << "  mapping:     " << to_string(s.mapping) << ", v = " << v << "\n"
                << "  constraints: " << s.constraints << "\n";
      if (*verbose) std::cout << "  description: " << s.description << "\n";
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
