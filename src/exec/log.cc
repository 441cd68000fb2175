// spdlog for the executor. Compiled without LibTorch's include path (its own
// {fmt} would shadow the one spdlog was built with): see CMakeLists.txt.
#include "pipeplan/exec/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace pipeplan::exec {

void log_warn(const std::string& message) { spdlog::warn("{}", message); }

bool log_debug_enabled() { return spdlog::should_log(spdlog::level::debug); }

void log_debug(const std::string& message) { spdlog::debug("{}", message); }

void log_to_stderr(const std::string& prefix) {
  auto logger = spdlog::get(prefix);
  if (!logger) logger = spdlog::stderr_color_mt(prefix);
  logger->set_pattern(prefix + ": %l: %v");
  spdlog::set_default_logger(logger);
}

namespace detail {

std::string set_log_level(const std::string& level, const std::string& fallback) {
  std::string applied = level;
  // from_str maps unknown names to "off"; keep the fallback then.
  if (spdlog::level::from_str(applied) == spdlog::level::off && applied != "off")
    applied = fallback;
  spdlog::set_level(spdlog::level::from_str(applied));
  return applied;
}

}  // namespace detail
}  // namespace pipeplan::exec
