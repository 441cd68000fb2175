// The verify API's names and text: transport models and diagnostic lines.
#include <string>

#include "pipeplan/verify.h"

namespace pipeplan {

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::Rendezvous: return "rendezvous";
    case Transport::Eager: return "eager";
    default: return "serial";
  }
}

std::optional<Transport> parse_transport(std::string_view s) {
  if (s == "rendezvous") return Transport::Rendezvous;
  if (s == "eager") return Transport::Eager;
  if (s == "serial") return Transport::Serial;
  return std::nullopt;
}

std::string format_diagnostics(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) {
    out += "error[" + d.code + "]";
    if (d.rank >= 0) out += " rank " + std::to_string(d.rank);
    if (d.index >= 0) out += " index " + std::to_string(d.index);
    if (!d.action.empty()) out += " (" + d.action + ")";
    out += ": " + d.message + "\n";
  }
  return out;
}

}  // namespace pipeplan
