// Executor internals: the hooks layer. The observers attached to a rank's
// executor and the handlers of the pass-through actions; the replay loop
// calls them and knows nothing of what they do (tracing, data-parallel
// gradient averaging). Not installed.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "pipeplan/exec/hooks.h"

namespace pipeplan::exec::detail {

class Hooks {
 public:
  /// add_observer(): set up with the plan this rank runs.
  void add(std::shared_ptr<Observer> observer, const Plan& plan, int rank);
  void remove(const std::shared_ptr<Observer>& observer);
  /// set_handler(): UNSHARD, RESHARD or REDUCE_GRAD only.
  void set_handler(ActionType type, PassThroughHandler handler);

  /// Whether any observer is attached (without one, no clock is read).
  bool watching() const { return !observers_.empty(); }
  void step_begin(int step, bool forward_only) const;
  void step_end(int step, bool forward_only) const;
  void entry(const ActionEvent& e) const;
  void exit(const ActionEvent& e) const;
  void stage_grads_ready(int stage, const std::vector<at::Tensor>& parameters) const;
  /// Whether a handler is set for this pass-through type.
  bool handles(ActionType type) const;
  /// Runs the handler of a pass-through action, if one is set.
  void pass_through(const PassThrough& context) const;

 private:
  std::vector<std::shared_ptr<Observer>> observers_;
  std::array<PassThroughHandler, 3> handlers_;  // UNSHARD, RESHARD, REDUCE_GRAD
};

}  // namespace pipeplan::exec::detail
