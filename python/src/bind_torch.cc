// torch.distributed.pipelining interop: from_torch() reads a schedule's
// in-memory order, to_torch_csv() writes what torch's `_load_csv` reads
// (strictly its dialect).
#include <pybind11/stl.h>

#include <sstream>

#include "common.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/torch_runtime.h"

namespace pipeplan::python {
namespace {

// Entries read so far over all rows: the plan readers' action limit, checked
// while iterating (an endless iterable stops here, not at a MemoryError).
struct EntryCount {
  std::size_t n = 0;
  void add() {
    if (++n > limits::kMaxActions)
      throw InputError("order: more than the supported " + std::to_string(limits::kMaxActions) +
                       " entries");
  }
};

// Rank r's entries: None stays idle, anything else is its str().
std::vector<std::optional<std::string>> row_of(const py::handle& actions, std::size_t rank,
                                               EntryCount& count) {
  if (py::isinstance<py::str>(actions) || !py::hasattr(actions, "__iter__"))
    throw TypeFailure{"order[" + std::to_string(rank) + "] must be a list of actions, got " +
                      type_name(actions)};
  std::vector<std::optional<std::string>> row;
  for (const py::handle a : actions) {
    count.add();
    if (a.is_none()) row.emplace_back(std::nullopt);
    else row.emplace_back(py::str(a).cast<std::string>());
  }
  return row;
}

// "0, 1, 5": the first few of a list of ranks, then how many in all.
std::string rank_list_text(const std::vector<long long>& ranks) {
  std::string s;
  for (std::size_t k = 0; k < ranks.size() && k < 8; ++k)
    s += (k ? ", " : "") + std::to_string(ranks[k]);
  if (ranks.size() > 8) s += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return s;
}

Plan from_torch(const py::object& order, const py::object& m_arg,
                const std::optional<std::string>& mapping, const std::string& schedule,
                bool forward_only) {
  const std::optional<int> num_microbatches =
      optional_count(m_arg, "num_microbatches", 1, limits::kMaxMicrobatches);
  std::vector<std::vector<std::optional<std::string>>> rows;
  EntryCount count;
  auto one_more_rank = [&] {
    if (rows.size() >= static_cast<std::size_t>(limits::kMaxRanks))
      throw InputError("order: more than the supported " + std::to_string(limits::kMaxRanks) +
                       " ranks");
  };
  if (py::isinstance<py::dict>(order) || py::hasattr(order, "keys")) {
    // torch's pipeline_order: {rank: [actions]} with ranks 0..pp-1.
    py::dict d = py::dict(order);
    std::vector<std::pair<long long, py::object>> entries;
    for (const auto& item : d) {
      if (!py::isinstance<py::int_>(item.first) || py::isinstance<py::bool_>(item.first))
        throw TypeFailure{"order's keys must be ranks (int), got " +
                          limits::excerpt(py::repr(item.first).cast<std::string>())};
      entries.emplace_back(int_in(item.first, "order's rank", 0, limits::kMaxRanks - 1),
                           py::reinterpret_borrow<py::object>(item.second));
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first != static_cast<long long>(i)) {
        std::vector<long long> ids;
        for (const auto& e : entries) ids.push_back(e.first);
        throw InputError("order holds ranks " + rank_list_text(ids) + "; expected every rank 0.." +
                         std::to_string(entries.size() - 1));
      }
    for (std::size_t i = 0; i < entries.size(); ++i)
      rows.push_back(row_of(entries[i].second, i, count));
  } else if (py::isinstance<py::str>(order) || !py::hasattr(order, "__iter__")) {
    throw TypeFailure{"order must map rank -> list of actions (torch's pipeline_order), got " +
                      type_name(order)};
  } else {
    for (const py::handle actions : order) {
      one_more_rank();
      rows.push_back(row_of(actions, rows.size(), count));
    }
  }
  const CsvReadOptions options = csv_options(num_microbatches, mapping, schedule, forward_only);
  py::gil_scoped_release release;
  return parse_action_table(rows, "order", options);
}

std::string to_torch_csv(const Plan& plan, std::optional<bool> reduce_grad,
                         const py::object& torch_version, const py::object& runtime) {
  const TorchTarget target = torch_target(optional_str(torch_version, "torch_version").value_or(""),
                                          optional_str(runtime, "runtime").value_or(""));
  const TorchVersion torch = target.version;
  std::string text, warning;
  {
    py::gil_scoped_release release;
    // By default a plan with comms gets REDUCE_GRAD where the target has it.
    const bool add =
        reduce_grad.value_or(!plan.is_compute_only() && torch_runtime(torch).reduce_grad);
    const Plan out = add ? add_reduce_grad(plan) : plan;
    std::ostringstream s;  // write_torch_csv refuses groups and memory actions
    write_torch_csv(out, s, torch);
    require_torch_runs(out, target);
    text = s.str();
    warning = torch_compile_guard_warning(out, torch);
  }
  if (!warning.empty() && PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0)
    throw py::error_already_set();
  return text;
}

}  // namespace

void bind_torch(py::module_& m) {
  m.def("from_torch", &from_torch, py::arg("order"), py::arg("num_microbatches") = py::none(),
        py::arg("mapping") = py::none(), py::arg("schedule") = "custom",
        py::arg("forward_only") = false,
        R"doc(Reads a torch.distributed.pipelining schedule's in-memory order, exactly
``schedule.pipeline_order`` (compute only) or
``schedule.pipeline_order_with_comms``: a dict rank -> list of actions (or a
list of lists), each action a string or any object whose ``str()`` is torch
grammar ("0F0", "1SEND_F3", "(0F7;7B3)OVERLAP_F_B"), None for an idle step.
As for a CSV file, ``num_microbatches`` and ``mapping`` ("loop" or "v") are
inferred when None (microbatches = largest + 1; placement from who runs
which stage); ``schedule`` is recorded (a known name also selects its
lowering); ``forward_only=True`` marks an inference order (no backward owed).
Raises InputError "order: rank R step S: ..." for a bad entry.

    >>> plan = pipeplan.from_torch(schedule.pipeline_order, num_microbatches=8)
    >>> assert pipeplan.verify(plan) == [])doc");

  m.def("to_torch_csv", &to_torch_csv, py::arg("plan"), py::arg("reduce_grad") = py::none(),
        py::arg("torch_version") = py::none(), py::arg("runtime") = py::none(),
        R"doc(The CSV torch's ``_PipelineScheduleRuntime._load_csv`` reads, strictly in
torch's dialect (what ``_dump_csv`` writes: one row per rank, one action per
cell, "\r\n" line ends). A compute-only plan is for ``format="compute_only"``
(torch lowers it); a plan with comms for ``format="compute_comms"``, which
runs it as written and needs ``<stage>REDUCE_GRAD`` after each stage's last
backward to scale gradients: ``reduce_grad=None`` adds it to plans with comms
(where missing) when ``torch_version`` has it (2.10 on), True/False force it.

``torch_version`` ("2.11", "2.15.0", ``torch.__version__``; 2.6 on; None:
2.15, or the runtime's newest) is the torch the file is for: from 2.15 rows with sends carry ``WAIT_SEND_F``/
``WAIT_SEND_B`` and each REDUCE_GRAD its ``WAIT_REDUCE_GRAD`` (2.15's runtime
refuses a compute_comms file without them; earlier ones refuse the tokens).
An action the release lacks (REDUCE_GRAD before 2.10, OVERLAP_F_B before 2.9)
is an InputError naming it and the first release that has it. ``runtime``
("torch-2.11" or "torch") names the runtime the file runs on; a plan with
comms is proved under it, else under ``torch_version``'s runtime (torch-2.11
up to 2.11), else, with neither given, under both (the file does not say which
torch loads it; actions as 2.15's); one that deadlocks there is a PlanError
with verify's diagnostics, the runtime named. A split backward (I/W) warns
(UserWarning): torch does not check torch.compile'd stages for a CSV-loaded
schedule. A plan with a BATCH_P2P group is an InputError (torch cannot read
groups; ``plan.to_csv()`` writes them).)doc");
}

}  // namespace pipeplan::python
