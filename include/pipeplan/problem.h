// What the user asks the planner for.
#pragma once

#include <string>

namespace pipeplan {

/// A planning request. stages_per_rank 0 means "the schedule's default".
struct Problem {
  std::string schedule = "1f1b";
  int pp_degree = 4;
  int num_microbatches = 8;
  int stages_per_rank = 0;
  /// Plan for inference: each rank keeps the schedule's forward order and
  /// drops every backward (no B/I/W, no SEND_B/RECV_B).
  bool forward_only = false;
};

}  // namespace pipeplan
