// Starting local ranks, like `torchrun --standalone --nproc-per-node N`.
// Plain POSIX; no torch.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pipeplan::exec {

struct LaunchOptions {
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< 0: a free loopback port
  /// How long the other ranks may still run once one failed (they should
  /// fail on their own within their timeout); then they are killed.
  std::chrono::milliseconds grace{30000};
};

/// How each rank ended: exit status, or 128 + signal number.
struct LaunchResult {
  std::vector<int> exit_codes;
  int first_failed = -1;    ///< rank that failed first, or -1
  std::vector<int> killed;  ///< ranks killed after the grace period
  int exit_code() const { return first_failed < 0 ? 0 : exit_codes[first_failed]; }
};

/// Runs `argv` (argv[0]: executable path) as `nproc` processes with RANK,
/// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
/// and waits for all. Throws InputError when a process cannot be started.
LaunchResult launch_local(const std::vector<std::string>& argv, const LaunchOptions& options);

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_loopback_port();

/// This process's command line (/proc/self/cmdline) with argv[0] replaced by
/// the running executable (/proc/self/exe), to start copies of itself.
std::vector<std::string> own_command_line();

}  // namespace pipeplan::exec
