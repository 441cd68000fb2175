// The executor's log: spdlog's default logger, behind functions that take
// plain strings. This header includes neither spdlog nor {fmt}: LibTorch 2.x
// ships a {fmt} of its own on its include path, which spdlog's headers must
// not meet, so code that includes torch logs through these.
#pragma once

#include <string>

namespace pipeplan::exec {

void log_warn(const std::string& message);
/// Whether debug lines are written (build their text only then).
bool log_debug_enabled();
void log_debug(const std::string& message);
/// Sends the log to stderr as "<prefix>: <level>: <message>" lines.
void log_to_stderr(const std::string& prefix);

namespace detail {
/// Sets the level by name ("debug", "info", "warn", "off", ...); an unknown
/// name applies `fallback`. Returns the name applied (configure_logging()).
std::string set_log_level(const std::string& level, const std::string& fallback);
}  // namespace detail

}  // namespace pipeplan::exec
