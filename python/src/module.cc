// The `pipeplan._pipeplan` extension: the pipeplan package's compiled half.
// C++ exceptions map onto the classes of pipeplan/errors.py.
#include <pybind11/stl.h>

#include <cmath>
#include <limits>

#include "common.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
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
    } catch (const TypeFailure& f) {
      set_error("InputTypeError", py::make_tuple(f.message));
    } catch (const py::cast_error&) {
      // A value pybind11 could not convert is a value of the wrong type; no
      // raw "Unable to cast" RuntimeError reaches the caller.
      set_error("InputTypeError", py::make_tuple("an argument has the wrong type"));
    } catch (const py::reference_cast_error&) {
      set_error("InputTypeError", py::make_tuple("an argument has the wrong type"));
    } catch (const PlanFailure& f) {
      set_error("PlanError", py::make_tuple(f.message, f.diagnostics));
    } catch (const PlanRejected& e) {  // the library's refusal of a plan (CLI exit 1)
      set_error("PlanError", py::make_tuple(std::string(e.what()), e.diagnostics()));
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

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

namespace {

// The int value of `value`, or TypeError; nullopt when no long long holds it.
std::optional<long long> int_value(const py::handle& value, const char* name, std::string& text) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    throw TypeFailure{std::string(name) + " must be an int, got " + type_name(value)};
  py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  if (!i) throw py::error_already_set();
  text = limits::excerpt(py::str(i).cast<std::string>());
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0) return std::nullopt;
  return v;
}

[[noreturn]] void out_of_range(const char* name, const std::string& text, long long lo,
                               long long hi) {
  throw InputError(std::string(name) + " must be in " + std::to_string(lo) + ".." +
                   std::to_string(hi) + ", got " + text);
}

}  // namespace

long long int_in(const py::handle& value, const char* name, long long lo, long long hi) {
  std::string text;
  const std::optional<long long> v = int_value(value, name, text);
  if (!v || *v < lo || *v > hi) out_of_range(name, text, lo, hi);
  return *v;
}

int count_arg(const py::handle& value, const char* name, long long lo, long long hi) {
  std::string text;
  const std::optional<long long> v = int_value(value, name, text);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max())
    out_of_range(name, text, lo, hi);
  return static_cast<int>(*v);
}

std::optional<int> optional_count(const py::handle& value, const char* name, long long lo,
                                  long long hi) {
  if (value.is_none()) return std::nullopt;
  return count_arg(value, name, lo, hi);
}

bool bool_arg(const py::handle& value, const char* name) {
  if (!PyBool_Check(value.ptr()))
    throw TypeFailure{std::string(name) + " must be a bool, got " + type_name(value)};
  return value.ptr() == Py_True;
}

std::optional<std::string> optional_str(const py::handle& value, const char* name) {
  if (value.is_none()) return std::nullopt;
  if (!PyUnicode_Check(value.ptr()))
    throw TypeFailure{std::string(name) + " must be a str or None, got " + type_name(value)};
  return value.cast<std::string>();
}

double float_arg(const py::handle& value, const char* name) {
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || PyIndex_Check(value.ptr())))
    throw TypeFailure{std::string(name) + " must be a number, got " + type_name(value)};
  const double x = PyFloat_AsDouble(value.ptr());  // an int too large for a double: -1, error
  if (x == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw InputError(std::string(name) + " " + limits::excerpt(py::str(value).cast<std::string>()) +
                     " is not a finite number");
  }
  if (!std::isfinite(x))
    throw InputError(std::string(name) + " " + py::repr(value).cast<std::string>() +
                     " is not a finite number");
  return x;
}

Transport transport_from(const std::string& name) {
  if (std::optional<Transport> t = parse_transport(name)) return *t;
  throw InputError("unknown transport '" + limits::excerpt(name) + "' (expected " +
                   transport_names(", ", " or ") + ")");
}

std::vector<Runtime> runtimes_arg(const py::object& runtime) {
  const std::optional<std::string> name = optional_str(runtime, "runtime");
  if (!name) return {};
  return {runtime_named(*name)};
}

StageMapping mapping_from(const std::string& name) {
  if (std::optional<StageMapping> m = parse_stage_mapping(name)) return *m;
  throw InputError("unknown mapping '" + limits::excerpt(name) + "' (expected loop or v)");
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
