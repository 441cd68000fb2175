// Shared pieces of the pybind11 layer: one bind_* function per concept, and
// the conversions every concept needs. The layer adds no planning logic of its
// own: each Python call maps onto the public C++ API (include/pipeplan/).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "pipeplan/cost_options.h"
#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan::python {

namespace py = pybind11;

/// An argument of the wrong type: raised in Python as
/// pipeplan.errors.InputTypeError (a TypeError and an InputError).
struct TypeFailure {
  std::string message;
};

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

/// The rule for an int argument (as the CLI's integer options): TypeError
/// unless an int (a bool is not one; objects with __index__ are), InputError
/// "NAME must be in LO..HI, got N" outside [lo, hi].
long long int_in(const py::handle& value, const char* name, long long lo, long long hi);
/// A count the library checks itself (pp_degree, num_microbatches,
/// stages_per_rank: its messages name the limits): int_in's TypeError, and
/// its InputError only for values no C++ int holds, worded with [lo, hi].
int count_arg(const py::handle& value, const char* name, long long lo, long long hi);
/// count_arg of a value that may be None.
std::optional<int> optional_count(const py::handle& value, const char* name, long long lo,
                                  long long hi);
/// A float argument: TypeError unless a real number (a bool is not one);
/// InputError unless finite.
double float_arg(const py::handle& value, const char* name);
/// lengths=: a list of tokens per microbatch, or a file path of them
/// (parse_lengths); empty for None. TypeError / InputError otherwise.
std::vector<double> lengths_arg(const py::object& lengths);
/// A flag argument: TypeError unless True or False (an int is not one:
/// batch_p2p=1 is refused, as the CLI's flags take no value).
bool bool_arg(const py::handle& value, const char* name);
/// A str argument that may be None: TypeError unless a str or None.
std::optional<std::string> optional_str(const py::handle& value, const char* name);
/// The Python type's name of `value`, for messages ("str", "NoneType").
std::string type_name(const py::handle& value);
/// Refuses a Plan (or other bound type) argument of the wrong type with a
/// TypeError naming `name` and the type given.
template <typename T>
const T& arg_of(const py::handle& value, const char* name, const char* type) {
  if (!py::isinstance<T>(value))
    throw TypeFailure{std::string(name) + " must be a pipeplan." + type + ", got " +
                      type_name(value)};
  return value.cast<const T&>();
}
/// Methods of an instance made by T.__new__ without __init__ (or a pickle
/// whose state never came) raise TypeError instead of reading unconstructed
/// memory: pybind11 allocates such a value lazily through the type's
/// operator_new hook, which refuses here.
template <typename T>
void refuse_uninitialised() {
  static_assert(std::is_class_v<T>);
  pybind11::detail::get_type_info(typeid(T))->operator_new = [](std::size_t) -> void* {
    throw TypeFailure{
        "this pipeplan object was never initialised (made by __new__ without __init__, or "
        "unpickled from a state that never came); make one with the module's functions"};
  };
}

/// "rendezvous" | "eager" | "serial"; InputError naming the choices otherwise.
Transport transport_from(const std::string& name);
/// A `runtime=` keyword: None -> none; a name -> its row (InputError naming
/// the runtimes for an unknown one).
std::vector<Runtime> runtimes_arg(const py::object& runtime);
/// "loop" | "v"; InputError naming the choices otherwise.
StageMapping mapping_from(const std::string& name);
/// A path argument: str or os.PathLike.
std::string path_from(const py::object& path);
/// What a CSV lacks (None = inferred), as the CLI's --microbatches, --mapping
/// and --schedule give it.
CsvReadOptions csv_options(std::optional<int> num_microbatches,
                           const std::optional<std::string>& mapping,
                           const std::optional<std::string>& schedule, bool forward_only);
/// The cost keywords (cost=, stage_costs=, comm=, bytes=, model=, the
/// copy stream's host_bw=, host_latency=, and lengths= (a list of tokens per
/// microbatch or a file of them, as --lengths): None when not given) as the CLI's
/// --cost, --stage-costs, --comm, --bytes, --model, --host-bw and
/// --host-latency; the library
/// checks and reads them (make_sim_options). `file`, when given, receives the
/// stage-costs file as read.
SimOptions sim_options(const py::object& cost, const py::object& stage_costs,
                       const py::object& comm, const py::object& bytes, const std::string& model,
                       StageCosts* file = nullptr, const py::object& host_bw = py::none(),
                       const py::object& host_latency = py::none(),
                       const py::object& lengths = py::none());
/// The memory policy keywords (recompute=, offload=: None, "all", "0,2-3" or
/// a list of stage numbers; offload_lead=: None or a count) as the CLI's
/// --recompute, --offload and --offload-lead.
MemoryPolicy memory_policy_arg(const py::object& recompute, const py::object& offload,
                               const py::object& offload_lead);
/// The lowering keywords (lowering=, prefetch=, serial_safe=, batch_p2p=)
/// as the CLI's --lowering, --prefetch, --serial-safe and --batch-p2p, with
/// the transfer cost stated when comm= is given; InputError for a bad value.
LoweringChoice lowering_choice(const py::handle& lowering, const py::handle& prefetch,
                               const py::handle& serial_safe, const py::handle& comm,
                               const py::handle& batch_p2p = py::bool_(false));
/// The layers= argument: a CSV path, a LayerProfile, or (name, F, B, W,
/// activation) rows / dicts; read by the library's CSV reader.
LayerProfile layers_from(const py::object& layers);

}  // namespace pipeplan::python
