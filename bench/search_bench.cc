// The search benchmark (search_bench.h).
#include "bench/search_bench.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "bench/harness.h"
#include "pipeplan/search.h"

namespace pipeplan::bench {
namespace {

std::string num(double x, int decimals = 2) { return decimal_text(x, decimals); }

}  // namespace

void run_search_bench(const std::vector<std::pair<std::string, LayerProfile>>& profiles,
                      const SearchBenchOptions& o, std::ostream& out) {
  out << "p = " << o.pp << ", m = " << o.microbatches
      << ", rendezvous transport; budget as a multiple of 1F1B's peak on the same profile.\n\n";
  out << "| profile | comm | budget | best library (fits) | library makespan | search | "
         "lower bound | gap to bound | search vs library | search plan | wall (ms) | CPU (ms) |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [name, profile] : profiles)
    for (double comm : o.comm) {
      SearchOptions base;
      base.pp_degree = o.pp;
      base.num_microbatches = o.microbatches;
      base.comm.comm_latency = comm;
      base.time_limit = o.time_limit;
      base.exact = false;
      double one_f_one_b = 0;
      try {
        one_f_one_b = search(profile, base).memory_limit;  // the default budget
      } catch (const InputError& e) {
        out << "| " << name << " | " << num(comm) << " | - | " << e.what()
            << " | | | | | | | | |\n";
        continue;
      }
      for (double factor : o.budgets) {
        SearchOptions so = base;
        so.memory_limit = one_f_one_b * factor;
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        std::string row = "| " + name + " | " + num(comm) + " | " + num(factor) + "x (" +
                          num(*so.memory_limit) + ") | ";
        try {
          const SearchResult r = search(profile, so);
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
          if (r.best_library)
            row += r.best_library->schedule + " v" +
                   std::to_string(r.best_library->stages_per_rank) + " | " +
                   num(r.best_library->makespan) + " | ";
          else row += "none | - | ";
          row +=
              num(r.makespan) + " | " + num(r.lower_bound) + " | " + num(r.gap() * 100, 1) + "% | ";
          row += r.best_library
                     ? num((1 - r.makespan / r.best_library->makespan) * 100, 1) + "% faster"
                     : std::string("only plan");
          row += " | " + std::string(to_string(r.plan.meta.mapping)) + " v" +
                 std::to_string(r.plan.meta.stages_per_rank) +
                 (r.plan.meta.schedule == "search" ? "" : " (" + r.plan.meta.schedule + ")") +
                 " | " + num(ms, 0) + (r.time_limited ? " (limit)" : "") + " | " + num(cpu_ms, 0) +
                 " |";
        } catch (const BudgetError& e) {
          row += "none | - | no plan fits (smallest: " + num(e.smallest_budget) + ") | | | | | | |";
        }
        out << row << "\n";
      }
    }
}

}  // namespace pipeplan::bench
