#include "bench/latency.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "bench/reach.h"
#include "bench/torch_lowering.h"
#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan::bench {
namespace {

// How one lowering fared over a schedule's shapes.
struct Tally {
  int at_bound = 0;
  double worst = 1.0;  // makespan / bound
  std::string worst_shape;
  void add(double makespan, double bound, const std::string& shape) {
    const double ratio = bound > 0 ? makespan / bound : 1.0;
    if (ratio <= 1.0 + 1e-9) ++at_bound;
    if (ratio > worst + 1e-12) {
      worst = ratio;
      worst_shape = shape;
    }
  }
};

struct Row {
  std::string schedule, comm;
  int shapes = 0;
  Tally seed, hiding, torch;
  int slower_than_torch = 0;
  int out_of_reach = 0;         // hiding misses the bound and no pair-stream execution reaches it
  double worst_vs_torch = 1.0;  // hiding / torch
  std::string worst_vs_torch_shape;
};

std::string fixed(double x, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

double makespan_of(const Plan& p, const SimOptions& o, const std::string& what) {
  SimResult r = simulate(p, o);
  if (!r.ok())
    throw std::runtime_error(what + ": simulation failed: " + r.problems.front().message);
  return r.makespan;
}

}  // namespace

std::string CommCase::name() const {
  std::ostringstream s;
  s << "lat " << latency;
  if (bandwidth > 0 && bytes > 0) s << " + " << bytes << "/" << bandwidth;
  return s.str();
}

void run_latency_bench(const LatencyBenchOptions& options, std::ostream& out) {
  std::vector<CommCase> cases = options.cases;
  if (cases.empty()) cases = {{0.1, 0, 0}, {0.25, 0, 0}, {1.0, 0, 0}, {0.1, 100, 40}};
  std::vector<std::string> names = options.schedules;
  if (names.empty())
    for (const auto& s : schedules()) names.push_back(s.name);

  std::vector<Row> rows;
  for (const std::string& given : names) {
    const ScheduleInfo& info = find_schedule(given);
    std::vector<Row> mine(cases.size());
    for (std::size_t c = 0; c < cases.size(); ++c) {
      mine[c].schedule = info.name;
      mine[c].comm = cases[c].name();
    }
    for (int p = options.pp_min; p <= options.pp_max; ++p)
      for (int v = 1; v <= options.v_max; ++v)
        for (int m = options.mb_min; m <= options.mb_max; ++m) {
          Plan compute;
          try {
            compute = plan_compute(Problem{info.name, p, m, v});
          } catch (const InputError&) {
            continue;  // the schedule rejects the shape
          }
          if (compute.meta.stages_per_rank != v) continue;
          const std::string shape =
              "p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v);
          const Plan torch = torch_lowering(compute);
          // "Before": the seed lowering as every schedule had it by default
          // until the latency-hiding one (serial-safe except gpipe/1f1b).
          LowerOptions seed = default_lowering(info.name);
          if (seed.mode != LowerMode::Seed) seed.serial_safe = true;
          seed.mode = LowerMode::Seed;
          const Plan seeded = lower(compute, seed);
          for (std::size_t c = 0; c < cases.size(); ++c) {
            SimOptions so;
            so.costs.comm_latency = cases[c].latency;
            so.costs.comm_bandwidth = cases[c].bandwidth;
            so.costs.transfer_bytes = cases[c].bytes;
            LowerOptions hide = default_lowering(info.name);
            hide.mode = LowerMode::LatencyHiding;
            hide.costs = so.costs;
            const Plan hidden = lower(compute, hide);
            for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
              VerifyResult vr = verify(hidden, {t});
              if (!vr.ok())
                throw std::runtime_error(
                    info.name + " " + shape + ": latency-hiding plan fails under " +
                    std::string(to_string(t)) + ": " + vr.diagnostics.front().message);
            }
            const std::string what = info.name + " " + shape + " " + cases[c].name();
            const double bound = makespan_of(compute, so, what + " (bound)");
            const double t_seed = makespan_of(seeded, so, what + " (seed)");
            const double t_hide = makespan_of(hidden, so, what + " (latency-hiding)");
            const double t_torch = makespan_of(torch, so, what + " (torch)");
            Row& row = mine[c];
            ++row.shapes;
            row.seed.add(t_seed, bound, shape);
            row.hiding.add(t_hide, bound, shape);
            row.torch.add(t_torch, bound, shape);
            if (t_hide > t_torch * (1 + 1e-9)) ++row.slower_than_torch;
            if (t_hide > bound * (1 + 1e-9) && bound_out_of_reach(compute, so.costs))
              ++row.out_of_reach;
            if (t_hide / t_torch > row.worst_vs_torch + 1e-12) {
              row.worst_vs_torch = t_hide / t_torch;
              row.worst_vs_torch_shape = shape;
            }
          }
        }
    for (auto& r : mine) rows.push_back(r);
  }

  if (options.csv) {
    out << "schedule,comm,shapes,seed_at_bound,seed_worst,hiding_at_bound,hiding_worst,"
           "torch_at_bound,torch_worst,slower_than_torch,worst_vs_torch,hiding_misses_out_of_"
           "reach\n";
    for (const Row& r : rows)
      out << r.schedule << "," << r.comm << "," << r.shapes << "," << r.seed.at_bound << ","
          << fixed(r.seed.worst, 4) << "," << r.hiding.at_bound << "," << fixed(r.hiding.worst, 4)
          << "," << r.torch.at_bound << "," << fixed(r.torch.worst, 4) << "," << r.slower_than_torch
          << "," << fixed(r.worst_vs_torch, 4) << "," << r.out_of_reach << "\n";
    return;
  }
  out << "Rendezvous makespan against the eager bound (F=1, B=2, I=W=1 per stage), p "
      << options.pp_min << ".." << options.pp_max << ", m " << options.mb_min << ".."
      << options.mb_max << ", v 1.." << options.v_max << "\n";
  out << "at bound: shapes whose makespan equals the bound; worst: largest makespan / bound;\n"
         "misses out of reach: shapes where latency hiding misses the bound and a proof shows\n"
         "that no execution with one transfer stream per rank pair reaches it\n\n";
  std::vector<std::vector<std::string>> table = {
      {"schedule", "transfer", "shapes", "seed at bound", "seed worst", "hiding at bound",
       "hiding worst", "torch at bound", "torch worst", "slower than torch", "worst vs torch",
       "hiding misses out of reach"}};
  auto pct = [](int n, int of) {
    return std::to_string(n) + " (" + fixed(of ? 100.0 * n / of : 100.0, 1) + "%)";
  };
  for (const Row& r : rows)
    table.push_back(
        {r.schedule, r.comm, std::to_string(r.shapes), pct(r.seed.at_bound, r.shapes),
         fixed(r.seed.worst, 3), pct(r.hiding.at_bound, r.shapes),
         fixed(r.hiding.worst, 3) + (r.hiding.worst > 1 ? " (" + r.hiding.worst_shape + ")" : ""),
         pct(r.torch.at_bound, r.shapes), fixed(r.torch.worst, 3),
         std::to_string(r.slower_than_torch),
         fixed(r.worst_vs_torch, 3) +
             (r.worst_vs_torch > 1 ? " (" + r.worst_vs_torch_shape + ")" : ""),
         std::to_string(r.out_of_reach) + " of " + std::to_string(r.shapes - r.hiding.at_bound)});
  out << "| ";
  for (std::size_t c = 0; c < table[0].size(); ++c)
    out << table[0][c] << (c + 1 < table[0].size() ? " | " : " |\n");
  out << "|";
  for (std::size_t c = 0; c < table[0].size(); ++c) out << (c < 2 ? "---|" : "---:|");
  out << "\n";
  for (std::size_t i = 1; i < table.size(); ++i) {
    out << "| ";
    for (std::size_t c = 0; c < table[i].size(); ++c)
      out << table[i][c] << (c + 1 < table[i].size() ? " | " : " |\n");
  }
}

}  // namespace pipeplan::bench
