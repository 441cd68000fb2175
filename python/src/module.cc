// The `pipeplan._pipeplan` extension: the pipeplan package's compiled half.
// C++ exceptions map onto the classes of pipeplan/errors.py.
#include <pybind11/stl.h>

#include "common.h"
#include "pipeplan/error.h"
#include "pipeplan/search.h"
#include "pipeplan/version.h"

namespace pipeplan::python {
namespace {

// Sets the Python error pipeplan.errors.<name>(*args).
void set_error(const char* name, const py::tuple& args) {
  py::object type = py::module_::import("pipeplan.errors").attr(name);
  PyErr_SetObject(type.ptr(), type(*args).ptr());
}

}  // namespace

void bind_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PlanFailure& f) {
      set_error("PlanError", py::make_tuple(f.message, f.diagnostics));
    } catch (const ShapeError& e) {
      set_error("ShapeError", py::make_tuple(e.what()));
    } catch (const BudgetError& e) {
      set_error("BudgetError", py::make_tuple(e.what(), e.smallest_budget));
    } catch (const InputError& e) {
      set_error("InputError", py::make_tuple(e.what()));
    } catch (const InternalError& e) {
      set_error("InternalError", py::make_tuple(e.what()));
    }
  });
}

Transport transport_from(const std::string& name) {
  if (std::optional<Transport> t = parse_transport(name)) return *t;
  throw InputError("unknown transport '" + name + "' (expected rendezvous, eager or serial)");
}

StageMapping mapping_from(const std::string& name) {
  if (std::optional<StageMapping> m = parse_stage_mapping(name)) return *m;
  throw InputError("unknown mapping '" + name + "' (expected loop or v)");
}

std::string path_from(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

CsvReadOptions csv_options(std::optional<int> num_microbatches,
                           const std::optional<std::string>& mapping,
                           const std::optional<std::string>& schedule, bool forward_only) {
  CsvReadOptions o;
  o.forward_only = forward_only;
  if (num_microbatches) {
    if (*num_microbatches < 1)
      throw InputError("num_microbatches must be at least 1, got " +
                       std::to_string(*num_microbatches));
    o.num_microbatches = num_microbatches;
  }
  if (mapping) o.mapping = mapping_from(*mapping);
  if (schedule) o.schedule = *schedule;
  return o;
}

}  // namespace pipeplan::python

PYBIND11_MODULE(_pipeplan, m) {
  namespace pp = pipeplan::python;
  namespace py = pybind11;
  m.doc() = "pipeplan's compiled core; import pipeplan instead.";
  // Types and signatures read pipeplan.Plan, not pipeplan._pipeplan.Plan.
  const py::object own_name = m.attr("__name__");
  m.attr("__name__") = "pipeplan";
  m.attr("__version__") = pipeplan::kVersion;
  pp::bind_errors(m);
  pp::bind_ir(m);
  pp::bind_passes(m);
  pp::bind_sim(m);
  pp::bind_search(m);
  pp::bind_torch(m);
  m.attr("__name__") = own_name;
}
