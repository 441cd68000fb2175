// What the front ends (the CLI and the Python module) do that the library
// must not: open files. Not part of pipeplan::core; both front ends link it.
#pragma once

#include <string>

namespace pipeplan::frontend {

/// The whole file at `path`, at most limits::kMaxInputBytes: the one
/// size-limited reader of every input (plans, stage costs, layer profiles,
/// traces). Throws InputError "cannot read 'PATH': WHY", one message for
/// every way a path fails (no such file, it is a directory, the system's
/// reason, larger than the supported size), so no reader sees a half file.
std::string read_file(const std::string& path);

/// All of standard input, at most limits::kMaxInputBytes; throws
/// InputError "cannot read stdin: WHY".
std::string read_stdin();

}  // namespace pipeplan::frontend
