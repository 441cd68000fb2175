// The verify API's text: diagnostic lines.
#include <string>

#include "pipeplan/verify.h"

namespace pipeplan {

std::string format_diagnostics(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) {
    if (!out.empty()) out += '\n';
    out += "error[" + d.code + "]";
    if (d.rank >= 0) out += " rank " + std::to_string(d.rank);
    if (d.index >= 0) out += " index " + std::to_string(d.index);
    if (!d.action.empty()) out += " (" + d.action + ")";
    out += ": " + d.message;
  }
  return out;
}

}  // namespace pipeplan
