// The transport models' names.
#include "pipeplan/transport.h"

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

}  // namespace pipeplan
