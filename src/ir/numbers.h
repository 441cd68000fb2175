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
/// A value that is not 0 never reads as 0: one too small for the places keeps
/// `decimals` significant digits instead (1e-11, 1.23457e-300).
inline std::string format_number(double x, int decimals = 6) {
  double scale = std::pow(10.0, decimals);
  double r = std::fabs(x) < 1e15 ? std::round(x * scale) / scale : x;
  char buf[64];
  if (r == 0.0 && x != 0.0 && std::isfinite(x)) {
    auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general,
                             decimals > 0 ? decimals : 1);
    return std::string(buf, res.ptr);
  }
  if (r == 0.0) r = 0.0;  // no "-0"
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
