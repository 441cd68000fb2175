// Child processes for the executor tests: start with extra environment
// variables, capture stdout/stderr to files, wait with a deadline.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

namespace pipeplan::test {

/// A started process; its output goes to `out_path` / `err_path`.
struct Child {
  pid_t pid = -1;
  std::string out_path, err_path;
  int exit_code = -1;  ///< set by wait_exit: status, 128+signal, or -1 on deadline
};

/// A fresh directory under the system temp directory.
std::string make_temp_dir(const std::string& prefix);

/// Starts argv (argv[0]: executable path) with the parent's environment minus
/// RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*, plus `env`.
Child spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& dir, const std::string& name);

/// Waits for the child; kills it and returns -1 once `limit` passed.
int wait_exit(Child& c, std::chrono::seconds limit);

/// Whole file (empty when missing).
std::string slurp(const std::string& path);

/// Polls `path` until it contains `needle` or `limit` passed; returns found.
bool wait_for_text(const std::string& path, const std::string& needle, std::chrono::seconds limit);

/// spawn + wait_exit, returning {exit_code, stdout, stderr}.
struct Ran {
  int exit_code = -1;
  std::string out, err;
};
Ran run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
        std::chrono::seconds limit = std::chrono::seconds(120));

/// Parses "step <k> loss <v>" lines; fails the test on any other stdout line.
std::vector<double> losses_of(const std::string& out);

}  // namespace pipeplan::test
