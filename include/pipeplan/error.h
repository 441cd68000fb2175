// Error types: bad input is a typed exception with a location; plan defects
// are Diagnostics (verify.h), never exceptions.
#pragma once

#include <stdexcept>
#include <string>

namespace pipeplan {

/// Bad user input: malformed file, unknown schedule, impossible shape.
/// The CLI maps it to exit code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

/// A shape the schedule cannot run (e.g. 1f1b with m < pp). Also exit 2.
class ShapeError : public InputError {
 public:
  explicit ShapeError(const std::string& what) : InputError(what) {}
};

/// A plan that cannot run, found by a pass rather than by verify() (e.g.
/// lower() on a compute order whose ranks wait on each other in a cycle).
/// Like a failed verification, the CLI maps it to exit code 1.
class PlanError : public InputError {
 public:
  explicit PlanError(const std::string& what) : InputError(what) {}
};

/// A broken internal invariant (a pipeplan bug). The CLI maps it to exit 3.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

}  // namespace pipeplan
