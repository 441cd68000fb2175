// Diagnostic: one plan defect, located by rank and action index.
#pragma once

#include <string>

namespace pipeplan {

/// One defect. `rank`/`index` locate the action (-1 when not applicable).
struct Diagnostic {
  std::string code;  ///< stable identifier, e.g. "fifo-both-send"
  int rank = -1;
  int index = -1;
  std::string action;   ///< the action in torch grammar, or ""
  std::string message;  ///< names the problem concretely
  friend bool operator==(const Diagnostic& a, const Diagnostic& b) {
    return a.code == b.code && a.rank == b.rank && a.index == b.index && a.action == b.action &&
           a.message == b.message;
  }
};

}  // namespace pipeplan
