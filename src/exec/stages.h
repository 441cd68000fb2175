// Executor internals: the stage adapters, one per local stage. What the
// user registered (set_stage, set_loss), what each stage trains, and the
// gradients it gathers over a step. Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec::detail {

class LocalStages {
 public:
  LocalStages(const PlanMeta& meta, int rank);

  /// This rank's stages, ascending.
  const std::vector<int>& stages() const { return local_; }
  /// Index of `stage` among them, or -1 when another rank owns it.
  int index(int stage) const {
    return stage >= 0 && stage < static_cast<int>(local_index_.size()) ? local_index_[stage] : -1;
  }
  bool owns(int stage) const { return index(stage) >= 0; }

  /// set_stage(): the module of a local stage; its trainable parameters.
  void set(int stage, StageModule module);
  void set_loss(LossFn loss) { loss_ = std::move(loss); }
  const LossFn& loss() const { return loss_; }
  bool registered(int stage) const { return modules_[index(stage)].has_value(); }
  /// The first local stage without a module, if any.
  std::optional<int> missing_module() const;
  /// train()/eval() on every registered torch module.
  void train(bool on);

  /// The stage's forward on `in` (the caller sets the grad mode).
  Values forward(int stage, const Values& in) const;
  /// Whether check_parameters() is still due for `stage`.
  bool parameters_unchecked(int stage) const { return !params_checked_[index(stage)]; }
  /// Once per stage, after its first training forward: refuses a trainable
  /// tensor the graph behind `roots` reaches that neither `leaves` nor the
  /// stage's parameters list (it would silently stay untrained).
  void check_parameters(int stage, const std::vector<at::Tensor>& roots,
                        const std::vector<at::Tensor>& leaves);
  /// The parameters of `stage` that require grad.
  const std::vector<at::Tensor>& trainable(int stage) const { return trainable_[index(stage)]; }
  /// Their names (same order): StageModule::parameter_names, or "#i" (the
  /// position in StageModule::parameters) when it names none.
  const std::vector<std::string>& trainable_names(int stage) const { return names_[index(stage)]; }
  /// Every parameter the stage lists and its module's buffers: model state
  /// an OFFLOAD leaves in place.
  std::vector<at::Tensor> resident(int stage) const;

  /// A training step begins: no gradient gathered, every microbatch's
  /// weight gradient still to come.
  void begin_step(int num_microbatches);
  /// Adds grads[offset..] (one per trainable parameter, undefined: none) to
  /// the stage's sums of the step.
  void accumulate(int stage, const std::vector<at::Tensor>& grads, std::size_t offset);
  /// One microbatch's weight gradient of `stage` is in; true when it was the
  /// last, after the step's sums (times `scale`) were added to each .grad.
  /// Then the parameters that received no gradient are recorded and, with
  /// `check`, the first of them is refused (InputError) before any .grad changes.
  bool weight_grads_done(int stage, double scale, bool check, int step);
  void end_step() { grad_sums_.clear(); }
  /// Keeps trainable parameter `index` of `stage` out of weight_grads_done's
  /// .grad update: its step gradient is held for take_held() (ties).
  void hold(int stage, std::size_t p);
  bool holds_any(int stage) const;
  /// The held step gradient (scaled), once; undefined when it got none.
  at::Tensor take_held(int stage, std::size_t p);
  /// check_gradients(): refuses the first parameter recorded without a gradient.
  void check_gradients() const;

  /// Whether boundary input `position` of `stage` may receive no gradient.
  bool input_may_be_unused(int stage, int position) const;

 private:
  std::string me() const { return "rank " + std::to_string(rank_) + ": "; }

  int rank_;
  std::vector<int> local_;        // ascending
  std::vector<int> local_index_;  // stage -> index into local_, or -1
  std::vector<std::optional<StageModule>> modules_;
  std::vector<std::vector<at::Tensor>> trainable_;  // [local index]: parameters requiring grad
  std::vector<std::vector<std::string>> names_;     // [local index][trainable]
  std::vector<std::vector<bool>> may_be_unused_;    // [local index][trainable]: opted out
  std::vector<std::vector<bool>> held_;             // [local index][trainable]: tied
  std::vector<std::vector<at::Tensor>> held_sums_;  // [local index][trainable]: this step
  std::vector<std::vector<int>> no_grad_;           // [local index]: trainable without a gradient
  int no_grad_step_ = -1;                           // the step no_grad_ describes
  std::string no_grad_message(int li, int step) const;
  std::vector<bool> params_checked_;  // [local index]: coverage walk done
  LossFn loss_;
  std::vector<std::vector<at::Tensor>> grad_sums_;  // [local index][trainable]
  std::vector<int> backward_left_;                  // [local index]: weight grads to come
};

/// (graph.cc) A tensor requiring grad that the graph behind `roots` reaches but that is
/// neither among `known` nor a leaf of it; undefined when there is none.
at::Tensor unlisted_trainable(const std::vector<at::Tensor>& roots,
                              const std::vector<at::Tensor>& known);

}  // namespace pipeplan::exec::detail
