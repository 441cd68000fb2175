// Model-aware planning: layer cost profiles (read_layers(), the layers=
// argument of simulate() and compare()) and search(), as `pipeplan search`
// and --layers run them.
#include <pybind11/stl.h>

#include <limits>
#include <sstream>

#include "common.h"
#include "frontend/read_file.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"
#include "pipeplan/search.h"
#include "pipeplan/step.h"

namespace pipeplan::python {
namespace {

using Release = py::gil_scoped_release;

// One row (name, F, B, W, activation) or {"name":.., "F":.., ...} as a CSV
// line, so the library's reader checks it like a file's row.
std::string csv_row(const py::handle& row, std::size_t index) {
  static const char* const kKeys[] = {"name", "F", "B", "W", "activation"};
  std::vector<py::object> cells;
  if (py::isinstance<py::dict>(row)) {
    const auto d = row.cast<py::dict>();
    for (const char* k : kKeys) {
      if (!d.contains(k))
        throw InputError("layers[" + std::to_string(index) + "]: missing key '" + k +
                         "' (expected name, F, B, W, activation)");
      cells.push_back(d[k]);
    }
  } else if (py::isinstance<py::sequence>(row) && !py::isinstance<py::str>(row)) {
    for (const auto& x : row.cast<py::sequence>())
      cells.push_back(py::reinterpret_borrow<py::object>(x));
    if (cells.size() != 5)
      throw InputError("layers[" + std::to_string(index) + "]: expected 5 values (name, F, B, W, " +
                       "activation), got " + std::to_string(cells.size()));
  } else {
    throw InputError("layers[" + std::to_string(index) +
                     "]: expected a (name, F, B, W, activation) " + "tuple or a dict, got " +
                     py::repr(row).cast<std::string>());
  }
  std::string line;
  for (std::size_t c = 0; c < cells.size(); ++c) {
    const std::string where = "layers[" + std::to_string(index) + "]." + kKeys[c];
    std::string text;
    if (c == 0) {  // the name: text, without the CSV's separators
      text = py::str(cells[c]).cast<std::string>();
      if (text.find_first_of(",#\n\r") != std::string::npos)
        throw InputError("layers[" + std::to_string(index) + "]: " + kKeys[c] + " '" +
                         limits::excerpt(text) + "' may not contain ',', '#' or a newline");
    } else if (py::isinstance<py::str>(cells[c])) {
      text = cells[c].cast<std::string>();  // as a file gives it: the reader checks it
      if (text.find_first_of(",#\n\r") != std::string::npos)
        throw InputError(where + " '" + limits::excerpt(text) + "' is not a number");
    } else {
      // A number (not a bool), written exactly; the reader checks its range.
      if (PyBool_Check(cells[c].ptr()) ||
          !(PyFloat_Check(cells[c].ptr()) || PyIndex_Check(cells[c].ptr())))
        throw TypeFailure{where + " must be a number, got " + type_name(cells[c])};
      text = py::repr(py::float_(cells[c])).cast<std::string>();
    }
    line += (c ? "," : "") + text;
  }
  return line;
}

}  // namespace

LayerProfile layers_from(const py::object& layers) {
  if (py::isinstance<LayerProfile>(layers)) return layers.cast<LayerProfile>();
  if (py::isinstance<py::str>(layers) || py::hasattr(layers, "__fspath__")) {
    const std::string path = path_from(layers);
    return parse_layer_profile(frontend::read_file(path), path);
  }
  if (!py::isinstance<py::sequence>(layers))
    throw InputError(
        "layers must be a CSV path, a LayerProfile or a list of (name, F, B, W, "
        "activation) rows, got " +
        py::repr(layers).cast<std::string>());
  std::string text = "name,F,B,W,activation\n";
  std::size_t index = 0;
  for (const auto& row : layers.cast<py::sequence>()) text += csv_row(row, index++) + "\n";
  // Line k + 2 of this text is layers[k]: the reader's "layers:LINE: ..."
  // becomes "layers[k]: ...".
  try {
    return parse_layer_profile(text, "layers");
  } catch (const InputError& e) {
    const std::string what = e.what();
    const std::size_t colon = what.find(": ");
    if (what.rfind("layers:", 0) == 0 && colon != std::string::npos) {
      try {
        const int line = std::stoi(what.substr(7, colon - 7));
        throw InputError("layers[" + std::to_string(line - 2) + "]" + what.substr(colon));
      } catch (const std::logic_error&) {  // no line number: keep the message
      }
    }
    throw;
  }
}

namespace {

// plan_step(): the per-step path of docs/lengths.md.
void bind_step(py::module_& m) {
  py::class_<StepPlan>(m, "StepPlan", R"doc(
plan_step()'s answer: ``plan`` (lowered and verified), ``microbatch_order``
(plan microbatch k is input microbatch microbatch_order[k]; with sequences,
the constructed microbatch), ``microbatches`` (with sequences: each plan
microbatch's sequence indices), ``lengths`` (tokens of each plan microbatch),
``makespan``, ``peak_memory``, ``schedule``, ``order_rule``, ``candidates``
and ``first_fit_makespan`` (with sequences: first fit decreasing into the
same budget, the best library schedule in its order).)doc")
      .def_readonly("plan", &StepPlan::plan)
      .def_readonly("microbatch_order", &StepPlan::microbatch_order)
      .def_readonly("microbatches", &StepPlan::microbatches)
      .def_readonly("lengths", &StepPlan::lengths)
      .def_readonly("makespan", &StepPlan::makespan)
      .def_readonly("peak_memory", &StepPlan::peak_memory)
      .def_readonly("schedule", &StepPlan::schedule)
      .def_readonly("order_rule", &StepPlan::order_rule)
      .def_readonly("candidates", &StepPlan::candidates)
      .def_readonly("first_fit_makespan", &StepPlan::first_fit_makespan)
      .def("__repr__", [](const StepPlan& s) {
        std::ostringstream o;
        o << "<pipeplan.StepPlan " << s.schedule << " makespan=" << s.makespan
          << " microbatches=" << s.lengths.size() << ">";
        return o.str();
      });
  m.def(
      "plan_step",
      [](const py::object& pp_degree, const py::object& lengths, const py::object& sequences,
         const py::object& microbatch_tokens, const py::object& layers,
         const py::object& memory_limit, const py::object& comm, const py::object& bytes,
         const std::string& model, const py::object& schedules, bool keep_order) {
        StepRequest req;
        req.pp_degree = count_arg(pp_degree, "pp_degree", 1, limits::kMaxRanks);
        req.lengths = lengths_arg(lengths);
        if (!sequences.is_none()) {
          req.sequences = lengths_arg(sequences);
          if (microbatch_tokens.is_none())
            throw InputError(
                "sequences need microbatch_tokens (the most tokens a microbatch holds)");
          req.microbatch_tokens = float_arg(microbatch_tokens, "microbatch_tokens");
        } else if (!microbatch_tokens.is_none()) {
          throw InputError("microbatch_tokens goes with sequences");
        }
        if (!layers.is_none()) req.layers = layers_from(layers);
        if (!memory_limit.is_none()) req.memory_limit = float_arg(memory_limit, "memory_limit");
        const SimOptions sim = sim_options(py::none(), py::none(), comm, bytes, model);
        req.costs = sim.costs;
        req.transport = sim.transport;
        if (!schedules.is_none()) req.schedules = schedules.cast<std::vector<std::string>>();
        req.keep_order = keep_order;
        Release release;
        return plan_step(req);
      },
      py::kw_only(), py::arg("pp_degree"), py::arg("lengths") = py::none(),
      py::arg("sequences") = py::none(), py::arg("microbatch_tokens") = py::none(),
      py::arg("layers") = py::none(), py::arg("memory_limit") = py::none(),
      py::arg("comm") = py::none(), py::arg("bytes") = 0.0, py::arg("model") = "rendezvous",
      py::arg("schedules") = py::none(), py::arg("keep_order") = false,
      R"doc(Plans one training step whose microbatches differ in length
(docs/lengths.md): every library schedule tried (default 1f1b,
interleaved-1f1b at v = 2, zb-h1, zbv, v-half) x every order rule (arrival,
longest first, shortest first, long and short in turn), planned, lowered and
simulated at the step's lengths; the fastest within ``memory_limit`` is
verified and returned as a StepPlan.

pp_degree          ranks
lengths            tokens of each microbatch in arrival order (a list or a file), or
sequences          tokens of each sequence of the step (a list or a file), packed into
microbatch_tokens  microbatches of at most this many tokens (first fit decreasing
                   and a packing that knows the pipeline; the faster wins)
layers             a layer profile (CSV path, LayerProfile or rows); costs then on each
                   schedule's balanced partition, at the profile's seq_len
memory_limit       per-rank peak activation memory allowed (None: no limit)
comm, bytes, model as simulate()
schedules          names tried instead of the defaults
keep_order         keep the arrival order (choose the schedule only)

    >>> s = pipeplan.plan_step(pp_degree=4, lengths=[512, 4096, 128, 900, 2048, 64, 700, 300])
    >>> s.plan.meta.num_microbatches, sorted(s.microbatch_order) == list(range(8))
    (8, True))doc");
}

}  // namespace

void bind_search(py::module_& m) {
  py::class_<Layer>(m, "Layer", "One layer of a profile, for one microbatch.")
      .def_readonly("name", &Layer::name)
      .def_readonly("F", &Layer::f, "Forward cost.")
      .def_readonly("B", &Layer::b, "Whole backward cost.")
      .def_readonly("W", &Layer::w, "Weight-gradient part of B (I = B - W).")
      .def_property_readonly("I", &Layer::i, "Input-gradient part of B: B - W.")
      .def_readonly("activation", &Layer::activation,
                    "Memory one microbatch keeps from its F until its backward finishes.")
      .def_property_readonly("input", &Layer::input_size,
                             "Size of the layer's input, what a recomputing stage starting here "
                             "keeps (the profile's input column; default: activation).")
      .def_property_readonly("recompute", &Layer::recompute_time,
                             "Time of its RECOMPUTE (the profile's recompute column; default: F).")
      .def_readonly("F_quad", &Layer::f_quad,
                    "Part of F that grows with the square of the length (attention; default 0).")
      .def_readonly("B_quad", &Layer::b_quad, "Part of B that grows with the square of the length.")
      .def_readonly("W_quad", &Layer::w_quad, "Part of W that grows with the square of the length.")
      .def("__repr__", [](const Layer& l) {
        std::ostringstream s;
        s << "Layer(" << l.name << ", F=" << l.f << ", B=" << l.b << ", W=" << l.w
          << ", activation=" << l.activation << ")";
        return s.str();
      });

  py::class_<LayerProfile>(m, "LayerProfile", "A model as its layers in pipeline order.")
      .def_readonly("layers", &LayerProfile::layers)
      .def_readonly("seq_len", &LayerProfile::seq_len,
                    "Tokens per microbatch the costs are stated at ('# seq_len: N'), or None.")
      .def("__len__", &LayerProfile::size)
      .def("__getitem__",
           [](const LayerProfile& p, const py::object& index) {
             long long i = int_in(index, "index", std::numeric_limits<long long>::min(),
                                  std::numeric_limits<long long>::max());
             const auto n = static_cast<long long>(p.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("layer index out of range");
             return p.layers[static_cast<std::size_t>(i)];
           })
      .def(
          "balanced_partition",
          [](const LayerProfile& p, const py::object& num_stages) {
            return balanced_partition(
                p, static_cast<int>(int_in(num_stages, "num_stages", 1, limits::kMaxStages)));
          },
          py::arg("num_stages"),
          "Layers per stage of the contiguous split that minimises the most expensive stage.")
      .def("__repr__", [](const LayerProfile& p) {
        return "<pipeplan.LayerProfile " + std::to_string(p.size()) + " layers>";
      });

  m.def("read_layers", &layers_from, py::arg("layers"), R"doc(A layer cost profile, as
``--layers FILE`` reads it: a CSV path ("name,F,B,W,activation", header
required, '#' comments) or a list of (name, F, B, W, activation) rows or
dicts with those keys. Raises InputError naming the bad row and column.)doc");

  py::class_<LibraryRun>(m, "LibraryRun", "A library schedule run on the same profile.")
      .def_readonly("schedule", &LibraryRun::schedule)
      .def_readonly("stages_per_rank", &LibraryRun::stages_per_rank)
      .def_readonly("partition", &LibraryRun::partition)
      .def_readonly("makespan", &LibraryRun::makespan)
      .def_readonly("peak_memory", &LibraryRun::peak_memory)
      .def_readonly("fits", &LibraryRun::fits, "Peak memory within the budget.")
      .def("__repr__", [](const LibraryRun& r) {
        std::ostringstream s;
        s << "<pipeplan.LibraryRun " << r.schedule << " v=" << r.stages_per_rank
          << " makespan=" << r.makespan << " peak_memory=" << r.peak_memory << ">";
        return s.str();
      });

  struct Searched {
    SearchResult result;
    SearchOptions options;
  };
  py::class_<Searched>(m, "SearchResult", R"doc(
search()'s answer: ``plan`` (lowered, verified under all three transports, its
partition recorded), ``makespan``, ``peak_memory``, ``lower_bound``, ``gap``,
``mapping``, ``stages_per_rank``, ``partition``, ``best_library`` (the fastest
library schedule within the budget, or None), ``best_library_recompute`` (the
same with full recompute), ``recomputed``/``offloaded`` (the plan's memory
actions), ``to_text()``/``to_json()`` as
`pipeplan search` writes them.)doc")
      .def_property_readonly("plan", [](const Searched& s) { return s.result.plan; })
      .def_property_readonly("makespan", [](const Searched& s) { return s.result.makespan; })
      .def_property_readonly(
          "peak_memory", [](const Searched& s) { return s.result.peak_memory; },
          "Largest peak activation memory over ranks.")
      .def_property_readonly("rank_peak_memory",
                             [](const Searched& s) { return s.result.rank_peak_memory; })
      .def_property_readonly("memory_limit",
                             [](const Searched& s) { return s.result.memory_limit; })
      .def_property_readonly("lower_bound", [](const Searched& s) { return s.result.lower_bound; })
      .def_property_readonly("lower_bound_reason",
                             [](const Searched& s) { return s.result.lower_bound_reason; })
      .def_property_readonly(
          "gap", [](const Searched& s) { return s.result.gap(); }, "makespan / lower_bound - 1.")
      .def_property_readonly(
          "mapping",
          [](const Searched& s) { return std::string(to_string(s.result.plan.meta.mapping)); })
      .def_property_readonly("stages_per_rank",
                             [](const Searched& s) { return s.result.plan.meta.stages_per_rank; })
      .def_property_readonly("partition",
                             [](const Searched& s) { return s.result.plan.meta.partition; })
      .def_property_readonly("origin", [](const Searched& s) { return s.result.origin; })
      .def_property_readonly("best_library",
                             [](const Searched& s) -> py::object {
                               if (!s.result.best_library) return py::none();
                               return py::cast(*s.result.best_library);
                             })
      .def_property_readonly("library", [](const Searched& s) { return s.result.library; })
      .def_property_readonly(
          "best_library_recompute",
          [](const Searched& s) -> py::object {
            if (!s.result.best_library_recompute) return py::none();
            return py::cast(*s.result.best_library_recompute);
          },
          "The fastest library schedule with full recompute within the budget, or None.")
      .def_property_readonly(
          "library_recompute", [](const Searched& s) { return s.result.library_recompute; },
          "Every library schedule with full recompute (a RECOMPUTE before each backward).")
      .def_property_readonly(
          "recomputed", [](const Searched& s) { return s.result.recomputed; },
          "(stage, microbatch)s the plan recomputes.")
      .def_property_readonly(
          "offloaded", [](const Searched& s) { return s.result.offloaded; },
          "(stage, microbatch)s the plan offloads to host.")
      .def_property_readonly(
          "microbatch_order", [](const Searched& s) { return s.result.microbatch_order; },
          "With lengths: plan microbatch k is input microbatch microbatch_order[k].")
      .def_property_readonly(
          "transfer_time", [](const Searched& s) { return s.result.transfer_time; },
          "The time every message took in the search (comm= or the default).")
      .def_property_readonly(
          "transfer_cost_default", [](const Searched& s) { return s.result.transfer_cost_default; },
          "True when no comm= was given and the search charged its default per message "
          "(0.25 x the profile's mean layer F).")
      .def_property_readonly("candidates", [](const Searched& s) { return s.result.candidates; })
      .def_property_readonly("time_limited",
                             [](const Searched& s) { return s.result.time_limited; })
      .def("to_text",
           [](const Searched& s) {
             std::ostringstream o;
             write_search_text(s.result, s.options, o);
             return o.str();
           })
      .def("to_json",
           [](const Searched& s) {
             std::ostringstream o;
             write_search_json(s.result, s.options, o);
             return o.str();
           })
      .def("__repr__", [](const Searched& s) {
        std::ostringstream o;
        o << "<pipeplan.SearchResult makespan=" << s.result.makespan
          << " peak_memory=" << s.result.peak_memory << " lower_bound=" << s.result.lower_bound
          << ">";
        return o.str();
      });

  m.def(
      "search",
      [](const py::object& layers, const py::object& pp_degree, const py::object& num_microbatches,
         const py::object& memory_limit, const py::object& comm, const py::object& bytes,
         const std::string& model, const py::object& time_limit,
         const py::object& max_stages_per_rank, const py::object& recompute,
         const py::object& offload, const py::object& host_bw, const py::object& host_latency,
         const py::object& lengths) {
        Searched s;
        s.options.pp_degree = count_arg(pp_degree, "pp_degree", 1, limits::kMaxRanks);
        s.options.num_microbatches =
            count_arg(num_microbatches, "num_microbatches", 1, limits::kMaxMicrobatches);
        if (!memory_limit.is_none())
          s.options.memory_limit = float_arg(memory_limit, "memory_limit");
        s.options.time_limit = float_arg(time_limit, "time_limit");
        s.options.max_stages_per_rank =
            count_arg(max_stages_per_rank, "max_stages_per_rank", 1, limits::kMaxStagesPerRank);
        const LayerProfile profile = layers_from(layers);
        const SimOptions sim = sim_options(py::none(), py::none(), comm, bytes, model, nullptr,
                                           host_bw, host_latency, lengths);
        sim.costs.check_lengths(s.options.num_microbatches);
        s.options.recompute = bool_arg(recompute, "recompute");
        s.options.offload = bool_arg(offload, "offload");
        s.options.comm = sim.costs;
        s.options.transfer_cost_stated = !comm.is_none();
        s.options.transport = sim.transport;
        {
          Release release;
          s.result = search(profile, s.options);
        }
        return s;
      },
      py::arg("layers"), py::arg("pp_degree"), py::arg("num_microbatches"), py::kw_only(),
      py::arg("memory_limit") = py::none(), py::arg("comm") = py::none(), py::arg("bytes") = 0.0,
      py::arg("model") = "rendezvous", py::arg("time_limit") = 3.0,
      py::arg("max_stages_per_rank") = 4, py::arg("recompute") = true, py::arg("offload") = true,
      py::arg("host_bw") = py::none(), py::arg("host_latency") = py::none(),
      py::arg("lengths") = py::none(),
      R"doc(Finds the plan to run for a model, as ``pipeplan search``: the layer
partition, stage mapping, v and every rank's compute order with the least
simulated makespan whose peak activation memory per rank is within
``memory_limit`` (default: 1F1B's peak on the same profile).

layers              a CSV path, a LayerProfile, or (name, F, B, W, activation) rows
memory_limit        --memory-limit, in the profile's activation unit
comm, bytes, model  --comm, --bytes, --model (as simulate()); without comm the search
                    charges 0.25 x the mean layer F per message (comm=0: free)
time_limit          --time-limit in seconds
max_stages_per_rank --max-v
recompute           False: --no-recompute (no RECOMPUTE in the plan)
offload             False: --no-offload (no OFFLOAD/RELOAD); offload needs host_bw
host_bw             --host-bw: the copy stream's bandwidth (activation units per
                    time unit); lets the search offload activations to host
host_latency        --host-latency: the latency of each copy (default 0)
lengths             --lengths: tokens of each microbatch (a list, or a file of
                    them); costs grow per microbatch from the profile's seq_len

Below 1F1B's budget the search decides per (stage, microbatch) whether its
activations are kept, recomputed or offloaded (docs/memory.md):
``recomputed`` and ``offloaded`` count them, ``best_library_recompute`` is
the baseline with full recompute.

Raises BudgetError (an InputError) when nothing fits: the message names the
smallest budget that works and ``smallest_budget`` holds it; InputError when
an option is bad.

    >>> r = pipeplan.search("examples/layers/gpt50.csv", 8, 32, comm=0.5)
    >>> r.makespan <= r.best_library.makespan
    True)doc");
  bind_step(m);
  refuse_uninitialised<Layer>();
  refuse_uninitialised<LayerProfile>();
  refuse_uninitialised<LibraryRun>();
  refuse_uninitialised<Searched>();
  refuse_uninitialised<StepPlan>();
}

}  // namespace pipeplan::python
