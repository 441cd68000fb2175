// The simulator and schedule comparison: simulate(), compare() and their
// results. Cost options are the CLI's (--cost, --stage-costs, --comm, --bytes,
// --model) as keyword arguments.
#include <pybind11/stl.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "common.h"
#include "frontend/read_file.h"
#include "pipeplan/compare.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/emit_sim.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/render.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan::python {
namespace {

using Release = py::gil_scoped_release;

// A number as spec text: exact (repr round-trips), never a separator.
std::string number_text(const py::handle& value, const std::string& name) {
  return py::repr(py::float_(float_arg(value, name.c_str()))).cast<std::string>();
}

// "F=1,B=2" stays a spec; {"F": 1, "B": 2} becomes one: keys are action
// types, values numbers (a string value cannot smuggle ",B=100" in).
std::string cost_spec(const py::object& cost) {
  if (py::isinstance<py::str>(cost)) return cost.cast<std::string>();
  if (!py::isinstance<py::dict>(cost))
    throw TypeFailure{
        "cost must be a spec like \"F=1,B=2,I=1,W=1\" or a dict like {\"F\": 1, "
        "\"B\": 2}, got " +
        type_name(cost)};
  std::string spec;
  for (const auto& item : cost.cast<py::dict>()) {
    if (!py::isinstance<py::str>(item.first))
      throw TypeFailure{"cost's keys must be action types (str), got " + type_name(item.first)};
    const std::string key = item.first.cast<std::string>();
    if (key.find_first_of(",=") != std::string::npos)
      throw InputError("cost: unknown action type '" + limits::excerpt(key) +
                       "' (use F, B, I, W or OVERLAP_F_B)");
    if (!spec.empty()) spec += ",";
    spec += key + "=" + number_text(item.second, "cost[" + limits::excerpt(key) + "]");
  }
  return spec;
}

// A stage-costs file path, or {stage: scale} / {stage: {"F": .., "B": ..}}
// given as the JSON the file format takes (so the reader validates it).
void stage_costs_from(const py::object& stage_costs, CostOptions& out) {
  if (py::isinstance<py::dict>(stage_costs)) {
    py::list stages;
    for (const auto& item : stage_costs.cast<py::dict>()) {
      py::dict entry;
      const long long stage = int_in(item.first, "stage_costs key", 0, limits::kMaxStages - 1);
      const std::string where = "stage_costs[" + std::to_string(stage) + "]";
      entry["stage"] = stage;
      // Numbers checked here: JSON has no NaN to carry one to the reader.
      if (py::isinstance<py::dict>(item.second)) {
        for (const auto& kv : item.second.cast<py::dict>()) {
          if (!py::isinstance<py::str>(kv.first))
            throw TypeFailure{where + ": keys must be F, B, I, W or scale (str), got " +
                              type_name(kv.first)};
          const std::string key = kv.first.cast<std::string>();
          entry[kv.first] =
              float_arg(kv.second, (where + "[" + limits::excerpt(key) + "]").c_str());
        }
      } else {
        entry["scale"] = float_arg(item.second, where.c_str());
      }
      stages.append(entry);
    }
    py::dict doc;
    doc["stages"] = stages;
    out.stage_costs = py::module_::import("json").attr("dumps")(doc).cast<std::string>();
    out.stage_costs_source = "stage_costs";
    return;
  }
  out.stage_costs_source = path_from(stage_costs);
  out.stage_costs = frontend::read_file(out.stage_costs_source);
}

}  // namespace

std::vector<double> lengths_arg(const py::object& lengths) {
  if (lengths.is_none()) return {};
  if (py::isinstance<py::str>(lengths) || py::hasattr(lengths, "__fspath__")) {
    const std::string path = path_from(lengths);
    return parse_lengths(frontend::read_file(path), path);
  }
  if (!py::isinstance<py::sequence>(lengths))
    throw py::type_error("lengths must be a list of tokens per microbatch or a file path, got " +
                         py::repr(lengths).cast<std::string>());
  std::vector<double> out;
  for (const auto& x : lengths.cast<py::sequence>()) {
    const std::string where = "lengths[" + std::to_string(out.size()) + "]";
    out.push_back(float_arg(x, where.c_str()));
  }
  if (out.empty()) throw InputError("lengths: no microbatch length given");
  return out;
}

namespace {

// --comm LAT[,BW]: "LAT,BW", a latency, or (latency, bandwidth).
std::string comm_spec(const py::object& comm) {
  if (py::isinstance<py::str>(comm)) return comm.cast<std::string>();
  if (py::isinstance<py::tuple>(comm) || py::isinstance<py::list>(comm)) {
    std::string spec;
    std::size_t n = 0;
    for (const auto& x : comm) {
      const std::string value = number_text(x, n == 0 ? "comm latency" : "comm bandwidth");
      spec += (n++ ? "," : "") + value;
    }
    if (n == 0 || n > 2) throw InputError("comm must be LATENCY or (LATENCY, BANDWIDTH)");
    return spec;
  }
  return number_text(comm, "comm");
}

// A simulation result with what produced it, for the report writers.
struct Simulation {
  py::object plan;  ///< the Plan simulated (kept alive; not copied)
  SimOptions options;
  SimResult result;
  const Plan& p() const { return plan.cast<const Plan&>(); }
};

std::string failure_message(const SimResult& r, const SimOptions& o) {
  return "the plan cannot run to completion under the " +
         (r.compute_only ? std::string("compute-only") : std::string(to_string(o.transport))) +
         " model:\n" + format_diagnostics(r.problems);
}

Simulation run_simulation(const py::object& plan_obj, const py::object& cost,
                          const py::object& stage_costs, const py::object& comm,
                          const py::object& bytes, const std::string& model, bool lower_first,
                          bool compute_only, bool check, const py::object& layers,
                          const py::object& recompute, const py::object& offload,
                          const py::object& offload_lead, const py::object& host_bw,
                          const py::object& host_latency, const py::object& lengths) {
  const Plan& given = arg_of<Plan>(plan_obj, "plan", "Plan");
  Simulation s;
  s.options =
      sim_options(cost, stage_costs, comm, bytes, model, nullptr, host_bw, host_latency, lengths);
  // A layer profile: stages cost the sums of their layers (the plan's
  // recorded partition, else the balanced one), as --layers.
  if (!layers.is_none()) {
    const LayerProfile profile = layers_from(layers);
    s.options.costs =
        pipeplan::stage_costs(profile, partition_for(profile, given.meta), s.options.costs);
  }
  if (!given.is_whole())
    throw InputError("the plan holds " + std::to_string(given.ranks.size()) + " of " +
                     std::to_string(given.meta.pp_degree) + " ranks; simulating needs every rank");
  if (lower_first && compute_only)
    throw InputError("give lower=True or compute_only=True, not both");
  // The memory policy goes into the order first, as `simulate FILE --recompute ..`.
  const MemoryPolicy policy = memory_policy_arg(recompute, offload, offload_lead);
  std::optional<Plan> changed;  // the plan simulated, when not the one given
  if (!policy.empty()) changed = apply_memory_policy(given, policy);
  const Plan& source = changed ? *changed : given;
  std::vector<Diagnostic> defects;
  const LoweringChoice choice = lowering_choice(py::none(), py::int_(0), py::bool_(false), comm);
  {
    Release release;
    if (lower_first && source.is_compute_only()) {
      // Lowered for the costs it is simulated with (a layer profile's stage
      // sums with layers=), as `simulate FILE --lower`.
      Lowered lowered =
          lower_if_compute_only(source, lower_options(source.meta, choice, s.options.costs));
      defects = std::move(lowered.defects);
      if (lowered.plan) changed = std::move(lowered.plan);
    } else {
      defects = check_structure(source);
      if (defects.empty() && compute_only && !source.is_compute_only())
        changed = compute_projection(source);
    }
    if (defects.empty()) s.result = simulate(changed ? *changed : given, s.options);
  }
  if (!defects.empty())
    throw PlanFailure{"the plan is not valid:\n" + format_diagnostics(defects), defects};
  s.plan = changed ? py::cast(std::move(*changed)) : plan_obj;
  if (check && !s.result.ok())
    throw PlanFailure{failure_message(s.result, s.options), s.result.problems};
  return s;
}

struct Comparison {
  int pp_degree = 0, num_microbatches = 0;
  SimOptions options;
  std::vector<ComparisonRow> rows;
};

Comparison run_comparison(
    const py::object& pp_arg, const py::object& m_arg, const py::object& v_arg,
    const std::optional<std::vector<std::string>>& names_given, const py::object& cost,
    const py::object& stage_costs, const py::object& comm, const py::object& bytes,
    const std::string& model, const py::object& layers, const py::object& lowering,
    const py::object& prefetch, const py::object& serial_safe, const py::object& batch_p2p,
    const py::object& recompute, const py::object& offload, const py::object& offload_lead,
    const py::object& host_bw, const py::object& host_latency, const py::object& lengths) {
  const int pp_degree = count_arg(pp_arg, "pp_degree", 1, limits::kMaxRanks);
  const int num_microbatches = count_arg(m_arg, "num_microbatches", 1, limits::kMaxMicrobatches);
  const std::optional<int> stages_per_rank =
      optional_count(v_arg, "stages_per_rank", 1, limits::kMaxStagesPerRank);
  const LoweringChoice choice = lowering_choice(lowering, prefetch, serial_safe, comm, batch_p2p);
  Comparison c;
  c.pp_degree = pp_degree;
  c.num_microbatches = num_microbatches;
  StageCosts file;
  c.options =
      sim_options(cost, stage_costs, comm, bytes, model, &file, host_bw, host_latency, lengths);
  if (file.absolute) use_rank_share(c.options, file);
  CompareRequest request;
  request.pp_degree = pp_degree;
  request.num_microbatches = num_microbatches;
  request.stages_per_rank = stages_per_rank.value_or(0);
  request.schedules = names_given.value_or(std::vector<std::string>{});
  if (!layers.is_none()) request.layers = layers_from(layers);
  request.lowering = choice;
  request.memory = memory_policy_arg(recompute, offload, offload_lead);
  {
    Release release;
    c.rows = compare_schedules(request, c.options);
  }
  if (std::string why =
          comparison_refusal(c.rows, pp_degree, num_microbatches, stages_per_rank.value_or(0));
      !why.empty())
    throw InputError(why);
  return c;
}

template <typename F>
std::string written(F&& f) {
  std::ostringstream s;
  f(s);
  return s.str();
}

py::list peaks(const std::vector<RankStats>& ranks) {
  py::list out;
  for (const RankStats& r : ranks) out.append(r.peak_activations);
  return out;
}

}  // namespace

// The keywords as the CLI's option text; the library checks and reads them.
SimOptions sim_options(const py::object& cost, const py::object& stage_costs,
                       const py::object& comm, const py::object& bytes, const std::string& model,
                       StageCosts* file, const py::object& host_bw, const py::object& host_latency,
                       const py::object& lengths) {
  CostOptions given;
  if (!cost.is_none()) given.cost = cost_spec(cost);
  if (!stage_costs.is_none()) stage_costs_from(stage_costs, given);
  if (!comm.is_none()) given.comm = comm_spec(comm);
  given.bytes = float_arg(bytes, "bytes");
  if (!host_bw.is_none()) given.host_bw = number_text(host_bw, "host_bw");
  if (!host_latency.is_none()) given.host_latency = number_text(host_latency, "host_latency");
  given.model = model;
  given.lengths = lengths_arg(lengths);
  return make_sim_options(given, file);
}

void bind_sim(py::module_& m) {
  py::class_<RankStats>(m, "RankStats", "One rank's outcome in a simulation.")
      .def_readonly("rank", &RankStats::rank)
      .def_readonly("busy", &RankStats::busy, "Time spent computing.")
      .def_readonly("idle", &RankStats::idle, "makespan - busy.")
      .def_readonly("first_start", &RankStats::first_start)
      .def_readonly("last_end", &RankStats::last_end)
      .def_readonly("peak_activations", &RankStats::peak_activations,
                    "Most (stage, microbatch) activations alive at once.")
      .def_readonly("peak_rank_activations", &RankStats::peak_rank_activations,
                    "peak_activations / stages_per_rank (whole-rank units).")
      .def_readonly("peak_memory", &RankStats::peak_memory,
                    "Most activation memory alive at once, in a layer profile's unit (without "
                    "one: peak_activations).")
      .def_readonly("peak_recv_buffers", &RankStats::peak_recv_buffers,
                    "Most receive buffers held at once: RECVs posted whose consumer has not "
                    "started (lower(prefetch=N) caps them).")
      .def_readonly("peak_host_memory", &RankStats::peak_host_memory,
                    "Most memory OFFLOADs hold on the host at once (0 without memory actions).")
      .def_readonly("copy_busy", &RankStats::copy_busy,
                    "Time the rank's copy stream is busy with OFFLOAD/RELOAD.")
      .def("__repr__", [](const RankStats& r) {
        std::ostringstream s;
        s << "RankStats(rank=" << r.rank << ", busy=" << r.busy << ", idle=" << r.idle
          << ", peak_activations=" << r.peak_activations << ")";
        return s.str();
      });

  py::class_<Simulation>(m, "SimResult", R"doc(
A simulation: ``makespan``, ``bubble_fraction``, ``ranks`` (RankStats),
``peak_activations`` (per rank), ``ok`` and ``problems``; ``to_text()`` and
``to_json()`` are `pipeplan simulate`'s reports, ``to_svg()`` and
``to_chrome_trace()`` its pictures.)doc")
      .def_property_readonly("makespan", [](const Simulation& s) { return s.result.makespan; })
      .def_property_readonly(
          "bubble_fraction", [](const Simulation& s) { return s.result.bubble_fraction; },
          "1 - sum(busy) / (ranks x makespan).")
      .def_property_readonly("ranks", [](const Simulation& s) { return s.result.ranks; })
      .def_property_readonly(
          "peak_activations", [](const Simulation& s) { return peaks(s.result.ranks); },
          "Per rank, the most activations alive at once.")
      .def_property_readonly(
          "peak_rank_activations",
          [](const Simulation& s) {
            py::list out;
            for (const RankStats& r : s.result.ranks) out.append(r.peak_rank_activations);
            return out;
          },
          "Per rank, the peak in whole-rank units (peak / stages_per_rank).")
      .def_property_readonly(
          "peak_memory",
          [](const Simulation& s) {
            double peak = 0;
            for (const RankStats& r : s.result.ranks) peak = std::max(peak, r.peak_memory);
            return peak;
          },
          "Largest peak activation memory over ranks (a layer profile's unit).")
      .def_property_readonly(
          "ok", [](const Simulation& s) { return s.result.ok(); },
          "True when every rank ran to the end of its list.")
      .def_property_readonly(
          "problems", [](const Simulation& s) { return s.result.problems; },
          "Why the run did not complete (empty when ok).")
      .def_property_readonly(
          "compute_only", [](const Simulation& s) { return s.result.compute_only; },
          "True when the plan had no SEND/RECV (values moved when produced).")
      .def_property_readonly(
          "plan", [](const Simulation& s) { return s.plan; },
          "The plan simulated (lowered or stripped when asked).")
      .def(
          "action_times",
          [](const Simulation& s) {
            py::list out;
            for (const auto& rank : s.result.times) {
              py::list row;
              for (const ActionTime& t : rank) row.append(py::make_tuple(t.start, t.end));
              out.append(row);
            }
            return out;
          },
          "Per rank, (start, end) of each action, parallel to plan.ranks.")
      .def(
          "to_text",
          [](const Simulation& s) {
            return written([&](std::ostream& o) { write_sim_text(s.p(), s.options, s.result, o); });
          },
          "`pipeplan simulate`'s text report.")
      .def(
          "to_json",
          [](const Simulation& s) {
            return written([&](std::ostream& o) { write_sim_json(s.p(), s.options, s.result, o); });
          },
          "`pipeplan simulate -f json`'s report.")
      .def(
          "to_svg",
          [](const Simulation& s, bool arrows) {
            if (!s.result.ok()) throw InputError("cannot draw a simulation that did not complete");
            SvgOptions o;
            o.arrows = arrows;
            return written([&](std::ostream& out) { write_svg(s.p(), s.result, o, out); });
          },
          py::arg("arrows") = false, "An SVG timeline (`pipeplan render --svg`).")
      .def(
          "to_chrome_trace",
          [](const Simulation& s) {
            if (!s.result.ok()) throw InputError("cannot draw a simulation that did not complete");
            return written([&](std::ostream& o) { write_chrome_trace(s.p(), s.result, o); });
          },
          "A Chrome trace for Perfetto (`pipeplan render --chrome-trace`).")
      .def("__repr__", [](const Simulation& s) {
        std::ostringstream o;
        o << "<pipeplan.SimResult makespan=" << s.result.makespan
          << " bubble_fraction=" << s.result.bubble_fraction << (s.result.ok() ? "" : " FAILED")
          << ">";
        return o.str();
      });

  m.def("simulate", &run_simulation, py::arg("plan"), py::kw_only(), py::arg("cost") = py::none(),
        py::arg("stage_costs") = py::none(), py::arg("comm") = py::none(), py::arg("bytes") = 0.0,
        py::arg("model") = "rendezvous", py::arg("lower") = false, py::arg("compute_only") = false,
        py::arg("check") = true, py::arg("layers") = py::none(), py::arg("recompute") = py::none(),
        py::arg("offload") = py::none(), py::arg("offload_lead") = py::none(),
        py::arg("host_bw") = py::none(), py::arg("host_latency") = py::none(),
        py::arg("lengths") = py::none(),
        R"doc(Runs a whole plan through the cost model, as ``pipeplan simulate``. The
keyword arguments are the CLI's options:

lengths       --lengths: tokens of each microbatch in microbatch order (a list,
              or a file of them); costs grow per microbatch from the length
              they are stated at (docs/lengths.md)

cost          --cost: "F=1,B=2,I=1,W=1[,OVERLAP_F_B=2.5]" or {"F": 1, "B": 2};
              B defaults to I+W, I = W = B/2 when only B is given
stage_costs   --stage-costs: a file path (CSV "stage,F,B,I,W" / "stage,SCALE"
              or JSON), or {stage: scale} / {stage: {"F": 2, "B": 3}}
comm          --comm: "LAT[,BW]", a latency, or (latency, bandwidth)
bytes         --bytes: size of every transfer (for the bandwidth)
model         --model: "rendezvous", "eager" or "serial"
lower         --lower: lower a compute-only plan first
compute_only  --compute-only: drop SEND/RECV; values move when produced
layers        --layers: a layer profile (CSV path "name,F,B,W,activation",
              read_layers() result, or rows); stages cost the sums of their
              layers (the plan's partition, else the balanced one) and
              peak_memory is in its activation unit
recompute, offload, offload_lead
              --recompute, --offload, --offload-lead: a memory policy
              inserted into the plan first (lower()'s keywords)
host_bw       --host-bw: the copy stream's bandwidth for OFFLOAD/RELOAD
              (activation units per time unit; default infinite)
host_latency  --host-latency: the latency of each copy (default 0)

Raises InputError for bad options or a partial plan, and PlanError (with
.diagnostics) when the plan is invalid or, with check=True, cannot run to
completion (check=False returns the failed result: .ok False, .problems).

    >>> r = pipeplan.simulate(pipeplan.plan("1f1b", 4, 8))
    >>> r.makespan, r.peak_activations
    (33.0, [4, 3, 2, 1]))doc");

  py::class_<ComparisonRow>(m, "ComparisonRow", "One schedule's row in compare().")
      .def_readonly("schedule", &ComparisonRow::schedule)
      .def_readonly("stages_per_rank", &ComparisonRow::stages_per_rank)
      .def_readonly("partition", &ComparisonRow::partition,
                    "Layers per stage (with layers=; empty otherwise).")
      .def_property_readonly("peak_memory", &ComparisonRow::peak_memory,
                             "Largest peak activation memory over ranks (layers= unit).")
      .def_property_readonly(
          "skipped",
          [](const ComparisonRow& r) {
            return r.skipped.empty() ? py::none() : py::object(py::str(r.skipped));
          },
          "Why the schedule rejected the shape; None when it ran.")
      .def_readonly("problems", &ComparisonRow::problems, "Why the simulation failed, if it did.")
      .def_readonly("makespan", &ComparisonRow::makespan)
      .def_readonly("bubble_fraction", &ComparisonRow::bubble_fraction)
      .def_readonly("ranks", &ComparisonRow::ranks)
      .def_property_readonly("peak_activations",
                             [](const ComparisonRow& r) { return peaks(r.ranks); })
      .def_property_readonly("peak_rank_activations", &ComparisonRow::peak_rank_activations,
                             "Largest peak over ranks, in whole-rank units.")
      .def("__repr__", [](const ComparisonRow& r) {
        std::ostringstream o;
        o << "<pipeplan.ComparisonRow " << r.schedule;
        if (!r.skipped.empty()) o << " skipped";
        else o << " v=" << r.stages_per_rank << " makespan=" << r.makespan;
        o << ">";
        return o.str();
      });
  refuse_uninitialised<RankStats>();
  refuse_uninitialised<Simulation>();
  refuse_uninitialised<ComparisonRow>();

  py::class_<Comparison>(m, "Comparison", R"doc(
compare()'s result: ``rows`` sorted by makespan (failed simulations, then
skipped schedules last), ``best`` (the first row that ran), ``to_text()`` and
``to_json()`` as `pipeplan compare` writes them.)doc")
      .def_readonly("rows", &Comparison::rows)
      .def_property_readonly(
          "best",
          [](const Comparison& c) -> py::object {
            for (const auto& r : c.rows)
              if (r.skipped.empty() && r.problems.empty()) return py::cast(r);
            return py::none();
          },
          "The fastest schedule's row (None when none ran to completion).")
      .def("to_text",
           [](const Comparison& c) {
             return written([&](std::ostream& o) {
               write_compare_text(c.pp_degree, c.num_microbatches, c.options, c.rows, o);
             });
           })
      .def("to_json",
           [](const Comparison& c) {
             return written([&](std::ostream& o) {
               write_compare_json(c.pp_degree, c.num_microbatches, c.options, c.rows, o);
             });
           })
      .def("__len__", [](const Comparison& c) { return c.rows.size(); })
      .def("__iter__", [](const Comparison& c) { return py::iter(py::cast(c.rows)); })
      .def("__getitem__", [](const Comparison& c, const std::string& name) {
        for (const auto& r : c.rows)
          if (r.schedule == name || r.schedule == find_schedule(name).name) return r;
        throw py::key_error(name);
      });
  refuse_uninitialised<Comparison>();

  m.def("compare", &run_comparison, py::arg("pp_degree"), py::arg("num_microbatches"),
        py::arg("stages_per_rank") = py::none(), py::kw_only(), py::arg("schedules") = py::none(),
        py::arg("cost") = py::none(), py::arg("stage_costs") = py::none(),
        py::arg("comm") = py::none(), py::arg("bytes") = 0.0, py::arg("model") = "rendezvous",
        py::arg("layers") = py::none(), py::arg("lowering") = py::none(), py::arg("prefetch") = 0,
        py::arg("serial_safe") = false, py::arg("batch_p2p") = false,
        py::arg("recompute") = py::none(), py::arg("offload") = py::none(),
        py::arg("offload_lead") = py::none(), py::arg("host_bw") = py::none(),
        py::arg("host_latency") = py::none(), py::arg("lengths") = py::none(),
        R"doc(Plans and simulates every schedule (or the ``schedules`` named) on one
shape, as ``pipeplan compare``; the cost options are simulate()'s, the
lowering keywords (``lowering``, ``prefetch``, ``serial_safe``, ``batch_p2p``)
lower()'s, as compare's --lowering, --prefetch, --serial-safe and --batch-p2p;
``recompute``, ``offload`` and ``offload_lead`` a memory policy inserted into
every schedule's order, and ``host_bw``/``host_latency`` its copy stream, as
--recompute, --offload, --offload-lead, --host-bw, --host-latency. The costs
are one rank's share of the model: a schedule with v stages per rank runs
each stage at 1/v of them; with ``layers`` (a layer profile, as simulate())
each schedule splits that one model into its own p x v stages instead
(ComparisonRow.partition, .peak_memory). Schedules that reject the shape are listed as
skipped. Raises InputError for an unknown name or when no schedule accepts
the shape.

    >>> pipeplan.compare(4, 8, schedules=["1f1b", "zbv"]).best.schedule
    'zbv')doc");
}

}  // namespace pipeplan::python
