// Executor internals: shared (tied) parameters. Each stage of a tie holds
// its own copy of one parameter (e.g. the token embedding of stage 0 and
// the LM head of the last stage); their step gradients are summed across
// the owning stages, on this rank and across ranks, once every rank ran its
// whole program, and the sum is added to every copy's .grad. Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "exec/stages.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"

namespace pipeplan::exec::detail {

class Ties {
 public:
  /// Checks the declared ties against the plan's stages (InputError).
  Ties(const PlanMeta& meta, int rank, const std::vector<Tie>& ties);

  bool empty() const { return ties_.empty(); }
  /// set_stage(): finds the stage's copy of each tie it is in
  /// (StageModule::tied) among its trainable parameters and has `stages`
  /// hold that parameter's step gradient back from .grad.
  void attach(int stage, const std::map<std::string, at::Tensor>& tied, LocalStages& stages);
  /// Once, before the first step on every rank: one allreduce over the
  /// pipeline group that every copy of every tie has the same shape, dtype
  /// and values (InputError naming the tie otherwise).
  void check_identical(Communicator& comm, const LocalStages& stages,
                       std::chrono::milliseconds timeout);
  bool checked() const { return checked_; }
  /// After a training step's last action: sums the held gradients of each
  /// tie (one allreduce per tie that spans ranks; every rank takes part)
  /// and adds the sum to every local copy's .grad.
  void reduce(Communicator& comm, LocalStages& stages, std::chrono::milliseconds timeout);
  /// "'embed' (stages 0, 3)": what the options fingerprint includes.
  std::string describe() const;

 private:
  std::string me() const { return "rank " + std::to_string(rank_) + ": "; }
  struct Copy {
    int stage = -1;
    std::size_t index = 0;  // among the stage's trainable parameters
  };
  std::vector<Tie> ties_;
  std::vector<bool> spans_ranks_;          // [tie]
  std::vector<std::vector<Copy>> copies_;  // [tie]: the local copies
  std::vector<std::int64_t> numel_;        // [tie]: learned by check_identical
  std::vector<at::ScalarType> dtype_;      // [tie]
  int rank_;
  bool checked_ = false;
};

}  // namespace pipeplan::exec::detail
