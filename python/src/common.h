// Shared pieces of the pybind11 layer: one bind_* function per concept, and
// the conversions every concept needs. The layer adds no planning logic of its
// own: each Python call maps onto the public C++ API (include/pipeplan/).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/cost_options.h"
#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan::python {

namespace py = pybind11;

/// A plan that cannot run (exit code 1 in the CLI): raised in Python as
/// pipeplan.PlanError carrying the diagnostics.
struct PlanFailure {
  std::string message;
  std::vector<Diagnostic> diagnostics;
};

void bind_errors(py::module_& m);
void bind_ir(py::module_& m);
void bind_passes(py::module_& m);
void bind_sim(py::module_& m);
void bind_search(py::module_& m);
void bind_torch(py::module_& m);

/// "rendezvous" | "eager" | "serial"; InputError naming the choices otherwise.
Transport transport_from(const std::string& name);
/// "loop" | "v"; InputError naming the choices otherwise.
StageMapping mapping_from(const std::string& name);
/// A path argument: str or os.PathLike.
std::string path_from(const py::object& path);
/// What a CSV lacks (None = inferred), as the CLI's --microbatches, --mapping
/// and --schedule give it.
CsvReadOptions csv_options(std::optional<int> num_microbatches,
                           const std::optional<std::string>& mapping,
                           const std::optional<std::string>& schedule, bool forward_only);
/// The cost keywords (cost=, stage_costs=, comm=, bytes=, model=) as the
/// CLI's --cost, --stage-costs, --comm, --bytes and --model; the library
/// checks and reads them (make_sim_options). `file`, when given, receives the
/// stage-costs file as read.
SimOptions sim_options(const py::object& cost, const py::object& stage_costs,
                       const py::object& comm, const py::object& bytes, const std::string& model,
                       StageCosts* file = nullptr);
/// The lowering keywords (lowering=, prefetch=, serial_safe=, batch_p2p=)
/// as the CLI's --lowering, --prefetch, --serial-safe and --batch-p2p, with
/// the transfer cost stated when comm= is given; InputError for a bad value.
LoweringChoice lowering_choice(const std::optional<std::string>& lowering,
                               const py::object& prefetch, bool serial_safe, const py::object& comm,
                               bool batch_p2p = false);
/// The layers= argument: a CSV path, a LayerProfile, or (name, F, B, W,
/// activation) rows / dicts; read by the library's CSV reader.
LayerProfile layers_from(const py::object& layers);

}  // namespace pipeplan::python
