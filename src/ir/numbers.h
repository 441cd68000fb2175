// Internal: deterministic number formatting shared by the simulator report
// and the renderers (no locale, no trailing zeros, no 0.30000000000000004).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace pipeplan::detail {

/// Rounds away floating-point noise from sums of costs (to 1e-9).
inline double tidy(double x) {
  if (!std::isfinite(x) || std::fabs(x) > 1e15) return x;
  double r = std::round(x * 1e9) / 1e9;
  return r == 0.0 ? 0.0 : r;  // no "-0"
}

/// Shortest decimal form of x rounded to `decimals` places: 33, 0.5, 2.25.
inline std::string format_number(double x, int decimals = 6) {
  double scale = std::pow(10.0, decimals);
  double r = std::fabs(x) < 1e15 ? std::round(x * scale) / scale : x;
  if (r == 0.0) r = 0.0;
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, r);
  return std::string(buf, res.ptr);
}

/// "27.27%".
inline std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", tidy(fraction) * 100.0);
  return buf;
}

}  // namespace pipeplan::detail
