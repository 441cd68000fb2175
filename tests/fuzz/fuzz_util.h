// Shared by the fuzz targets: a failed property aborts (libFuzzer then saves
// the input as a crash), with the input's problem on stderr.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

namespace pipeplan::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "property violated: %s\n", what.c_str());
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

/// The longest limits::excerpt: kMaxQuoted bytes, each escaped as \xNN at
/// worst, and the "... (N bytes)" that says it was cut.
inline constexpr std::size_t kMaxExcerpt = 4 * limits::kMaxQuoted + 32;

/// A message that quotes user text: bounded, and every control byte escaped
/// as \xNN (limits::excerpt), so it cannot move the terminal's cursor.
inline void check_message(const std::string& message, std::size_t bound) {
  check(!message.empty(), "a refusal without a message");
  check(message.size() <= bound, "an error message quotes too much: " + message.substr(0, 200));
  for (char c : message)
    check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f,
          "a raw control byte in a message");
}

/// Readers accept at most limits.h sizes, but a fuzz input is small; skip
/// passes whose tables follow the declared shape rather than the input when
/// the shape is far larger than the input (they are bounded, just slow).
inline bool small_shape(const Plan& p, std::size_t input_size) {
  const long long cells = static_cast<long long>(p.meta.num_stages()) * p.meta.num_microbatches;
  return cells <= 64LL * static_cast<long long>(input_size) + 4096;
}

}  // namespace pipeplan::fuzz
