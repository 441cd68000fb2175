#include "pipeplan/limits.h"

namespace pipeplan::limits {

std::string shape_problem(long long pp, long long v, long long m) {
  auto n = [](long long x) { return std::to_string(x); };
  if (pp > kMaxRanks)
    return "pp_degree " + n(pp) + " is more than the supported " + n(kMaxRanks) + " ranks";
  if (v > kMaxStagesPerRank)
    return "stages_per_rank " + n(v) + " is more than the supported " + n(kMaxStagesPerRank);
  if (m > kMaxMicrobatches)
    return "num_microbatches " + n(m) + " is more than the supported " + n(kMaxMicrobatches);
  const long long stages = pp * v;  // both bounded above: no overflow
  if (stages > kMaxStages)
    return "pp_degree x stages_per_rank = " + n(stages) + " stages is more than the supported " +
           n(kMaxStages);
  const long long cells = stages * m;
  if (cells > kMaxStageMicrobatches)
    return "stages x microbatches = " + n(stages) + " x " + n(m) + " = " + n(cells) +
           " is more than the supported " + n(kMaxStageMicrobatches) +
           " (a plan that size needs more memory than pipeplan allows)";
  return {};
}

std::string excerpt(std::string_view text) {
  const bool cut = text.size() > kMaxQuoted;
  const std::string_view shown = text.substr(0, cut ? kMaxQuoted : text.size());
  std::string out;
  out.reserve(shown.size());
  for (char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {  // ESC, CR, NUL..: shown, never sent to the terminal
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (cut) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace pipeplan::limits
