// Executor internals, the layer above the communicator: boundary values and
// their shapes in flight. One message per boundary, direction and
// microbatch; a boundary whose shapes are neither given (output_specs) nor
// learned sends a fixed-size header with them before its first payload of a
// step, so no extra forward is needed. Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/boundary.h"
#include "pipeplan/exec/executor.h"

namespace pipeplan::exec::detail {

class Transfers {
 public:
  /// Checks options.output_specs against the plan's boundaries.
  Transfers(const PlanMeta& meta, int rank, const ExecOptions& options);

  /// The group the messages go over (connect()).
  void use(Communicator* comm) { comm_ = comm; }
  /// Before a step's first action: tags carry the step's parity, and each
  /// boundary whose shapes are due sends its header again.
  void begin_step(int step);
  /// After a step's last action: every send completed, every receive consumed.
  void finish_step();

  /// RECV_F (dir Forward) / RECV_B (Backward) of stage `stage`: posted now
  /// when the shapes are known (NCCL: always), else at its consumer.
  void post_recv(Dir dir, int stage, int mb);
  /// The values of a posted receive, waiting for them.
  Values complete_recv(Dir dir, int stage, int mb);
  /// SEND_F of stage `stage`'s outputs; checks them against the boundary's
  /// shapes (given or learned), sending the header first when due.
  void send_forward(int stage, int mb, const Values& outputs);
  /// SEND_B of stage `stage`'s input gradients.
  void send_backward(int stage, int mb, const Values& grads);
  /// The gradient's arrival proves the peer consumed this microbatch's
  /// activations: those sends are complete and their buffers can go.
  void release_forward_sends(int stage, int mb);
  /// Drops the forward sends known to have completed (Communicator's
  /// PendingOp::done), so their messages free before the gradient arrives.
  void release_completed_sends();

  /// A BATCH_P2P group: its members are posted between begin_group() and
  /// end_group() as one batch (Communicator::begin_group: one NCCL group),
  /// then await_group() waits for all of them (receives in, sends
  /// delivered); a rank passes a group only when it ended.
  void begin_group();
  void end_group();
  void await_group(const Action* members, std::size_t n);
  /// NCCL, before a group: the shape headers its members carry, as a batch
  /// of their own, the received ones waited for (NCCL cannot wait inside a
  /// group, and its payloads need their shapes when posted). `outputs(s, m)`
  /// gives what SEND_F(s, m) will send.
  void exchange_group_headers(const Action* members, std::size_t n,
                              const std::function<const Values&(int, int)>& outputs);

  /// A local forward of `stage` (not the last) produced `outputs`: their
  /// shapes when nothing said them yet.
  void note_outputs(int stage, const Values& outputs);
  /// The shapes of stage `stage`'s outputs, when known.
  const std::optional<BoundarySpec>& spec(int stage) const { return specs_[stage]; }
  /// Payload bytes of the last transfer posted (for observers).
  std::int64_t last_bytes() const { return last_bytes_; }
  /// While observers watch: time every wait on a peer (waited()).
  void time_waits(bool on) { timing_ = on; }
  /// Time blocked on peers so far, counted while time_waits is on; the
  /// difference across an action is its ActionEvent::wait.
  Clock::duration waited() const { return waited_; }

 private:
  std::string me() const { return "rank " + std::to_string(rank_) + ": "; }
  int tag(Dir dir, int stage, int mb, int index) const {
    return make_tag(step_, dir, stage, mb, index, num_stages_, num_mb_);
  }
  bool header_due(int stage) const { return !given_[stage] && (!learned_[stage] || reexchange_); }
  at::Tensor pack(int stage, const Values& values, const BoundarySpec& spec) const;
  void await_header(int from_stage);
  bool header_to_send(int stage) const { return header_due(stage) && !header_sent_[stage]; }
  bool header_to_receive(int from) const { return header_due(from) && !header_received_[from]; }
  void send_header(int stage, const BoundarySpec& now, int mb);
  void post_header(int from);
  void check_same_shapes(int stage, int mb, const BoundarySpec& now) const;
  /// Every wait on a peer's operation goes through here (timed when asked).
  void wait_for(PendingOp& op, const std::string& what);

  struct PostedRecv {
    std::unique_ptr<PendingOp> op;  // null for a boundary without values or a deferred post
    at::Tensor message;
    BoundarySpec spec;
    bool deferred = false;  // spec unknown when posted: post at the consumer (Gloo only)
    int peer = -1, tag = -1;
    std::string what;
  };
  struct PostedSend {
    std::unique_ptr<PendingOp> op;
    std::string what;
  };
  void await_recv(PostedRecv& r, Dir dir, int stage);

  const PlanMeta& meta_;
  int rank_;
  int num_stages_, num_mb_;
  std::chrono::milliseconds timeout_;
  bool reexchange_;
  Communicator* comm_ = nullptr;
  int step_ = 0;
  std::int64_t last_bytes_ = 0;
  bool timing_ = false;
  Clock::duration waited_{};
  // Shapes of stage s's outputs: `given_` from output_specs; `learned_` once
  // a header crossed (both ends agree on when that is).
  std::vector<std::optional<BoundarySpec>> specs_;
  std::vector<bool> given_, learned_;
  std::vector<bool> header_sent_, header_received_;     // this step, per stage
  std::vector<std::unique_ptr<PendingOp>> header_ops_;  // deferred header receives
  std::vector<at::Tensor> header_msgs_;
  std::map<std::tuple<int, int, int>, PostedRecv> recvs_;             // (dir, stage, mb)
  std::map<std::pair<int, int>, std::vector<PostedSend>> fwd_sends_;  // (stage, mb)
  std::vector<PostedSend> other_sends_;
  std::size_t group_sends_from_ = 0;  // other_sends_ before the open group's members
};

}  // namespace pipeplan::exec::detail
