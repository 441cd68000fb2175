// Test helpers shared by every test binary.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::test {

/// Result of running the pipeplan CLI binary.
struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

/// Runs the pipeplan binary with `args` (no shell), feeding `stdin_text`.
CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");

/// run_cli with the address space capped at `mib`: the outcome must not
/// depend on how much memory the machine has. Uncapped under ASan (which
/// reserves terabytes of shadow address space); stdin is /dev/null.
CliResult run_cli_capped(const std::vector<std::string>& args, long mib);

/// Parses "0F0 0SEND_F0 (0SEND_F1;0RECV_B0)BATCH_P2P ..." into actions, one
/// cell a token (REQUIREs every token to parse).
std::vector<Action> actions(const std::string& text);

/// Reads a file relative to the source tree.
std::string read_source_file(const std::string& relative);

/// Writes `text` into a fresh temporary file and returns its path.
std::string temp_file(const std::string& name, const std::string& text);

/// A recorded per-rank compute order of a peer's generator:
/// "<name>_p<P>_m<M>_v<V>.txt", one line a rank.
struct OrderFixture {
  std::string file, name;
  int p = 0, m = 0;
  std::vector<std::string> ranks;
};
/// Every order fixture in `dir`, by file name.
std::vector<OrderFixture> order_fixtures(const std::string& dir);

}  // namespace pipeplan::test
