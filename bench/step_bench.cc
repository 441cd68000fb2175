// The per-step benchmark (step_bench.h).
#include "bench/step_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>

#include "bench/harness.h"
#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/search.h"
#include "pipeplan/simulate.h"
#include "pipeplan/step.h"
#include "pipeplan/verify.h"

namespace pipeplan::bench {
namespace {

std::string num(double x, int decimals = 2) { return decimal_text(x, decimals); }

// Seeded token counts: a long tail (lognormal, sigma 1.1: p99 / median
// about 13) or uniform, both around `median` tokens, clamped to [32, cap].
std::vector<double> draw(const std::string& dist, int n, double median, double cap, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<double> out;
  if (dist == "lognormal") {
    std::lognormal_distribution<double> d(std::log(median), 1.1);
    for (int k = 0; k < n; ++k) out.push_back(std::clamp(std::round(d(gen)), 32.0, cap));
  } else {
    std::uniform_real_distribution<double> d(median / 4, median * 2);
    for (int k = 0; k < n; ++k) out.push_back(std::round(d(gen)));
  }
  return out;
}

double ratio_of(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

void run_step_bench(const std::vector<std::pair<std::string, LayerProfile>>& profiles,
                    const StepBenchOptions& o, std::ostream& out) {
  out << "p = " << o.pp << ", m = " << o.microbatches << ", transfer latency " << num(o.comm)
      << ", rendezvous; lengths seeded (" << o.seed
      << "); makespans in the profile's unit (docs/lengths.md).\n\n";
  out << "| profile | lengths | 1f1b padded | best library, arrival order | plan_step | search "
         "--lengths | search vs padded 1f1b | search vs library arrival | plan+lower+verify "
         "(ms) | plan_step (ms) |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [name, profile] : profiles)
    for (const std::string dist : {"lognormal", "uniform"}) {
      const double median = profile.seq_len ? *profile.seq_len / 4 : 1024;
      const double cap = profile.seq_len ? *profile.seq_len * 4 : 16384;
      const std::vector<double> lengths = draw(dist, o.microbatches, median, cap, o.seed);
      const double longest = *std::max_element(lengths.begin(), lengths.end());
      StepRequest req;
      req.pp_degree = o.pp;
      req.lengths = lengths;
      req.layers = profile;
      req.costs.comm_latency = o.comm;
      // Padded: every microbatch at the longest, 1f1b.
      StepRequest padded = req;
      padded.lengths.assign(lengths.size(), longest);
      padded.schedules = {"1f1b"};
      padded.keep_order = true;
      StepRequest arrival = req;
      arrival.keep_order = true;
      std::string row = "| " + name + " | " + dist + " | ";
      try {
        const double pad = plan_step(padded).makespan;
        const double lib = plan_step(arrival).makespan;
        const StepPlan step = plan_step(req);
        SearchOptions so;
        so.pp_degree = o.pp;
        so.num_microbatches = o.microbatches;
        so.comm.comm_latency = o.comm;
        so.transfer_cost_stated = true;  // the same messages as the rows beside it
        so.comm.set_lengths(lengths);
        so.time_limit = o.time_limit;
        so.exact = false;
        const SearchResult searched = search(profile, so);
        // The fast path's pieces: one schedule planned, lowered and
        // verified at the step's costs; plan_step whole.
        // (A structured binding cannot be captured before C++20.)
        const LayerProfile& layers = profile;
        const double plv = 1e3 * min_time_s(o.repeat, 0.2, [&] {
                             const Planner planner(Problem{"1f1b", o.pp, o.microbatches, 1});
                             CostModel c = stage_costs(layers, balanced_partition(layers, o.pp),
                                                       step.options.costs);
                             const Plan p = lower(planner.compute(), planner.lowering({}, c));
                             if (!verify(p).ok())
                               throw std::runtime_error("step bench: 1f1b does not verify");
                           });
        const double fast = 1e3 * min_time_s(o.repeat, 0.2, [&] { (void)plan_step(req); });
        row += num(pad) + " | " + num(lib) + " | " + num(step.makespan) + " (" + step.schedule +
               ", " + step.order_rule + ") | " + num(searched.makespan) + " | " +
               num(100 * (1 - ratio_of(searched.makespan, pad)), 1) + "% shorter | " +
               num(100 * (1 - ratio_of(searched.makespan, lib)), 1) + "% shorter | " + num(plv, 3) +
               " | " + num(fast, 3) + " |";
      } catch (const InputError& e) {
        row += "refused: " + std::string(e.what()) + " | | | | | | | |";
      }
      out << row << "\n";
    }
  // Microbatches built from the step's sequences.
  out << "\n| profile | sequences | budget (tokens) | first fit decreasing, best library | "
         "plan_step packing | shorter by | microbatches |\n";
  out << "|---|---|---|---|---|---|---|\n";
  for (const auto& [name, profile] : profiles)
    for (const std::string dist : {"lognormal", "uniform"}) {
      const double median = profile.seq_len ? *profile.seq_len / 8 : 512;
      const double budget = profile.seq_len ? *profile.seq_len * 2 : 8192;
      StepRequest req;
      req.pp_degree = o.pp;
      req.sequences = draw(dist, 4 * o.microbatches, median, budget, o.seed + 1);
      req.microbatch_tokens = budget;
      req.layers = profile;
      req.costs.comm_latency = o.comm;
      std::string row = "| " + name + " | " + dist + " " + std::to_string(req.sequences.size()) +
                        " | " + num(budget, 0) + " | ";
      try {
        const StepPlan step = plan_step(req);
        const double ffd = step.first_fit_makespan.value_or(0.0);
        row += num(ffd) + " | " + num(step.makespan) + " (" + step.schedule + ") | " +
               num(100 * (1 - ratio_of(step.makespan, ffd)), 1) + "% | " +
               std::to_string(step.microbatches.size()) + " |";
      } catch (const InputError& e) {
        row += "refused: " + std::string(e.what()) + " | | | |";
      }
      out << row << "\n";
    }
}

}  // namespace pipeplan::bench
