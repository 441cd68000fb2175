#include "bench/latency.h"

#include <algorithm>
#include <cmath>
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

// One (schedule, cost set, latency) over the grid's shapes.
struct Row {
  std::string schedule, costs;
  double latency = 0.0;
  int shapes = 0;
  Tally seed, hiding, torch, batched;  // batched: --batch-p2p (Megatron's groups)
  int slower_than_torch = 0;
  double worst_vs_torch = 1.0;  // hiding / torch
  std::string worst_vs_torch_shape;
  // Of the shapes where latency hiding misses the bound:
  int out_of_reach = 0;  // proved out of reach: reach.cc's proof, or the lowering's exact search
  int by_search = 0;     // of those, proved only by the exact search (its optimum is above)
  int neither = 0;       // neither at the bound nor proved out of reach: the cases to fix
  int optimal = 0;  // shapes where no lowering of the order is faster (at the bound, or proved)
  int local = 0;    // misses whose orders are a proved local optimum (no adjacent swap helps)
};

std::string fixed(double x, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

double makespan_of(const Plan& p, const SimOptions& o, const std::string& what) {
  SimResult r = simulate(p, o);
  if (!r.ok())
    throw std::runtime_error(what + ": simulation failed: " + r.problems.front().message);
  return r.makespan;
}

void print_table(const std::vector<std::vector<std::string>>& table, std::size_t text_columns,
                 std::ostream& out) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    out << "| ";
    for (std::size_t c = 0; c < table[i].size(); ++c)
      out << table[i][c] << (c + 1 < table[i].size() ? " | " : " |\n");
    if (i == 0) {
      out << "|";
      for (std::size_t c = 0; c < table[0].size(); ++c)
        out << (c < text_columns ? "---|" : "---:|");
      out << "\n";
    }
  }
}

// One shape of one schedule under every cost set and latency.
void add_shape(const Plan& compute, const std::string& shape, const LatencyBenchOptions& o,
               std::vector<Row>& rows) {
  const std::string& schedule = compute.meta.schedule;
  const Plan torch = torch_lowering(compute);
  // "Before": the seed lowering as every schedule had it by default
  // until the latency-hiding one (serial-safe except gpipe/1f1b).
  LowerOptions seed = default_lowering(schedule);
  if (seed.mode != LowerMode::Seed) seed.serial_safe = true;
  seed.mode = LowerMode::Seed;
  const Plan seeded = lower(compute, seed);
  // Megatron-LM's batch_p2p_comm: the seed placement, a send and the receive
  // it meets posted as one BATCH_P2P group; proved under rendezvous and serial.
  LowerOptions batch = default_lowering(schedule);
  batch.mode = LowerMode::Seed;
  batch.batch_p2p = true;
  const Plan batched = lower(compute, batch);
  for (Transport t : {Transport::Rendezvous, Transport::Serial}) {
    VerifyResult vr = verify(batched, {t});
    if (!vr.ok())
      throw std::runtime_error(schedule + " " + shape + ": batched plan fails under " +
                               std::string(to_string(t)) + ": " + vr.diagnostics.front().message);
  }
  std::size_t k = 0;
  for (const CostSet& c : o.cost_sets)
    for (double latency : o.latencies) {
      Row& row = rows[k++];
      SimOptions so;
      so.costs.f = c.f;
      so.costs.b = c.b;
      so.costs.i = c.i;
      so.costs.w = c.w;
      so.costs.comm_latency = latency;
      // Per-pair orders, searched where the bound is missed: the planner's
      // lowering for stated costs (a schedule's own one order per rank is
      // for the nominal costs, where its makespan is the same).
      LowerOptions hide = default_lowering(schedule);
      hide.mode = LowerMode::LatencyHiding;
      hide.serial_safe = false;
      hide.costs = so.costs;
      LowerReport report;
      const Plan hidden = lower(compute, hide, report);
      const std::string what =
          schedule + " " + shape + " " + c.name + " latency " + number(latency);
      for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
        VerifyResult vr = verify(hidden, {t});
        if (!vr.ok())
          throw std::runtime_error(what + ": latency-hiding plan fails under " +
                                   std::string(to_string(t)) + ": " +
                                   vr.diagnostics.front().message);
      }
      const double bound = makespan_of(compute, so, what + " (bound)");
      const double t_seed = makespan_of(seeded, so, what + " (seed)");
      const double t_hide = makespan_of(hidden, so, what + " (latency-hiding)");
      const double t_torch = makespan_of(torch, so, what + " (torch)");
      const double t_batch = makespan_of(batched, so, what + " (batched)");
      if (std::abs(report.makespan - t_hide) > 1e-9 * t_hide)
        throw std::runtime_error(what + ": the lowering planned a makespan of " +
                                 number(report.makespan) + ", the simulator gives " +
                                 number(t_hide));
      ++row.shapes;
      row.seed.add(t_seed, bound, shape);
      row.hiding.add(t_hide, bound, shape);
      row.torch.add(t_torch, bound, shape);
      row.batched.add(t_batch, bound, shape);
      if (t_hide > t_torch * (1 + 1e-9)) ++row.slower_than_torch;
      if (t_hide / t_torch > row.worst_vs_torch + 1e-12) {
        row.worst_vs_torch = t_hide / t_torch;
        row.worst_vs_torch_shape = shape;
      }
      const bool proved_best = report.orders == LowerReport::Orders::Optimal;
      if (t_hide <= bound * (1 + 1e-9) || proved_best) ++row.optimal;
      if (t_hide <= bound * (1 + 1e-9)) continue;
      if (report.orders == LowerReport::Orders::Local) ++row.local;
      const bool proof = bound_out_of_reach(compute, so.costs).has_value();
      if (proof || proved_best) {
        ++row.out_of_reach;
        if (!proof) ++row.by_search;
      } else {
        ++row.neither;
      }
    }
}

void print_csv(const std::vector<Row>& rows, std::ostream& out) {
  out << "schedule,costs,latency,shapes,seed_at_bound,seed_worst,hiding_at_bound,hiding_worst,"
         "torch_at_bound,torch_worst,slower_than_torch,worst_vs_torch,out_of_reach,"
         "out_of_reach_by_search,neither,optimal,local_optimum,batched_at_bound,batched_worst\n";
  for (const Row& r : rows)
    out << r.schedule << "," << r.costs << "," << number(r.latency) << "," << r.shapes << ","
        << r.seed.at_bound << "," << fixed(r.seed.worst, 4) << "," << r.hiding.at_bound << ","
        << fixed(r.hiding.worst, 4) << "," << r.torch.at_bound << "," << fixed(r.torch.worst, 4)
        << "," << r.slower_than_torch << "," << fixed(r.worst_vs_torch, 4) << "," << r.out_of_reach
        << "," << r.by_search << "," << r.neither << "," << r.optimal << "," << r.local << ","
        << r.batched.at_bound << "," << fixed(r.batched.worst, 4) << "\n";
}

void print_rows(const std::vector<Row>& rows, std::ostream& out) {
  std::vector<std::vector<std::string>> table = {
      {"schedule", "costs", "latency", "shapes", "seed at bound", "seed worst", "hiding at bound",
       "hiding worst", "torch at bound", "torch worst", "slower than torch", "worst vs torch",
       "out of reach (by search)", "neither", "optimal", "batched at bound", "batched worst"}};
  auto pct = [](int n, int of) {
    return std::to_string(n) + " (" + fixed(of ? 100.0 * n / of : 100.0, 1) + "%)";
  };
  for (const Row& r : rows)
    table.push_back(
        {r.schedule, r.costs, number(r.latency), std::to_string(r.shapes),
         pct(r.seed.at_bound, r.shapes), fixed(r.seed.worst, 3), pct(r.hiding.at_bound, r.shapes),
         fixed(r.hiding.worst, 3) + (r.hiding.worst > 1 ? " (" + r.hiding.worst_shape + ")" : ""),
         pct(r.torch.at_bound, r.shapes), fixed(r.torch.worst, 3),
         std::to_string(r.slower_than_torch),
         fixed(r.worst_vs_torch, 3) +
             (r.worst_vs_torch > 1 ? " (" + r.worst_vs_torch_shape + ")" : ""),
         std::to_string(r.out_of_reach) + " (" + std::to_string(r.by_search) + ")",
         std::to_string(r.neither), pct(r.optimal, r.shapes), pct(r.batched.at_bound, r.shapes),
         fixed(r.batched.worst, 3)});
  print_table(table, 3, out);
}

// Per cost set: schedules x latencies, each cell "at bound / out of reach /
// neither".
void print_summary(const std::vector<Row>& rows, const LatencyBenchOptions& o, std::ostream& out) {
  const std::size_t per_schedule = o.cost_sets.size() * o.latencies.size();
  for (std::size_t c = 0; c < o.cost_sets.size(); ++c) {
    out << "\n"
        << o.cost_sets[c].name << ": shapes at the bound / proved out of reach / neither\n\n";
    std::vector<std::vector<std::string>> table = {{"schedule", "shapes"}};
    for (double l : o.latencies) table[0].push_back("lat " + number(l));
    for (std::size_t s = 0; s * per_schedule < rows.size(); ++s) {
      const Row* first = &rows[s * per_schedule + c * o.latencies.size()];
      std::vector<std::string> line = {first->schedule, std::to_string(first->shapes)};
      for (std::size_t l = 0; l < o.latencies.size(); ++l) {
        const Row& r = first[l];
        line.push_back(std::to_string(r.hiding.at_bound) + " / " + std::to_string(r.out_of_reach) +
                       " / " + std::to_string(r.neither));
      }
      table.push_back(line);
    }
    print_table(table, 1, out);
  }
}

}  // namespace

void run_latency_bench(const LatencyBenchOptions& options, std::ostream& out) {
  LatencyBenchOptions o = options;
  if (o.latencies.empty()) o.latencies = {0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0};
  if (o.cost_sets.empty())
    o.cost_sets = {{"F=1 B=2 I=W=1", 1, 2, 1, 1},
                   {"F=1 B=1 I=W=0.5", 1, 1, 0.5, 0.5},
                   {"F=1 B=3 I=2 W=1", 1, 3, 2, 1}};
  std::vector<std::string> names = o.schedules;
  if (names.empty())
    for (const auto& s : schedules()) names.push_back(s.name);

  std::vector<Row> rows;
  for (const std::string& given : names) {
    const ScheduleInfo& info = find_schedule(given);
    std::vector<Row> mine;
    for (const CostSet& c : o.cost_sets)
      for (double l : o.latencies) {
        Row r;
        r.schedule = info.name;
        r.costs = c.name;
        r.latency = l;
        mine.push_back(r);
      }
    for (int p = o.pp_min; p <= o.pp_max; ++p)
      for (int v = 1; v <= o.v_max; ++v)
        for (int m = o.mb_min; m <= o.mb_max; ++m) {
          Plan compute;
          try {
            compute = plan_compute(Problem{info.name, p, m, v});
          } catch (const InputError&) {
            continue;  // the schedule rejects the shape
          }
          if (compute.meta.stages_per_rank != v) continue;
          add_shape(
              compute,
              "p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v), o,
              mine);
        }
    rows.insert(rows.end(), mine.begin(), mine.end());
  }

  if (o.csv) return print_csv(rows, out);
  out << "Rendezvous makespan against the eager bound, p " << o.pp_min << ".." << o.pp_max << ", m "
      << o.mb_min << ".." << o.mb_max << ", v 1.." << o.v_max << "\n";
  out << "at bound: shapes whose makespan equals the bound; worst: largest makespan / bound;\n"
         "out of reach: shapes where latency hiding misses the bound and it is proved that no\n"
         "execution with one transfer stream per rank pair reaches it (bench/reach.cc), or\n"
         "(by search) the lowering's exact search found no faster pair orders; neither: the\n"
         "rest (the cases to fix); optimal: shapes where no lowering of the order is faster\n\n";
  print_rows(rows, out);
  print_summary(rows, o, out);
}

}  // namespace pipeplan::bench
