// Point-to-point communication for the executor: a c10d process group (Gloo
// on CPU, NCCL on CUDA) set up from torchrun-style environment variables.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/error.h"

namespace pipeplan::exec {

/// Thrown when a peer dies, stalls past the timeout, or the group cannot be
/// formed (pipeplan/error.h).
using pipeplan::CommError;

/// Which c10d backend carries the tensors.
enum class Backend : std::uint8_t {
  Gloo,  ///< CPU tensors; receives matched by tag
  Nccl,  ///< CUDA tensors on device LOCAL_RANK; matched in posting order per pair
};
std::string_view to_string(Backend b);
std::optional<Backend> parse_backend(std::string_view s);
/// Whether this build can create `b` (NCCL needs a CUDA LibTorch).
bool backend_available(Backend b);

/// torchrun-style process coordinates.
struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  /// True when RANK and WORLD_SIZE are both set in the environment.
  static bool present();
  /// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; throws
  /// InputError naming the variable when one is missing or malformed.
  static DistEnv from_environment();
};

/// An operation in flight. Holds the tensor until it completes.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  /// Blocks until done; throws CommError (with `what`) on failure or timeout.
  virtual void wait(std::chrono::milliseconds timeout, const std::string& what) = 0;
  /// Without blocking: true once the operation is known to have completed
  /// (wait() then returns at once); false when not, or not known yet.
  virtual bool done() { return false; }
};

/// A connected process group. All methods are called from one thread.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  /// Device every tensor crossing this group lives on (CPU or cuda:LOCAL_RANK).
  virtual at::Device device() const = 0;
  /// Posts an asynchronous send of a contiguous tensor; `tag` >= 0.
  virtual std::unique_ptr<PendingOp> isend(const at::Tensor& t, int peer, int tag) = 0;
  /// Posts an asynchronous receive into a preallocated contiguous tensor.
  virtual std::unique_ptr<PendingOp> irecv(const at::Tensor& t, int peer, int tag) = 0;
  /// Opens a batch of isend/irecv posted together, as torch's
  /// batch_isend_irecv: on NCCL one ncclGroupStart/ncclGroupEnd (c10d's
  /// startCoalescing/endCoalescing), launched at end_group(); on Gloo the
  /// operations are posted at once and end_group() does nothing. Only
  /// isend/irecv may be called in between; batches do not nest.
  virtual void begin_group() {}
  /// Closes the batch begin_group() opened; its operations are then waited
  /// as usual.
  virtual void end_group() {}
  /// Element-wise maximum across ranks, in place (int64 or floating tensor).
  virtual void allreduce_max(at::Tensor& t, std::chrono::milliseconds timeout) = 0;
  /// Returns once every rank called it (or throws CommError after `timeout`).
  virtual void barrier(std::chrono::milliseconds timeout) = 0;
  /// Posts an element-wise sum across ranks, in place, of a contiguous
  /// tensor on device(); completes when the returned operation is waited.
  virtual std::unique_ptr<PendingOp> iallreduce_sum(const at::Tensor& t) = 0;
  /// Blocking element-wise sum across ranks, in place.
  void allreduce_sum(const at::Tensor& t, std::chrono::milliseconds timeout) {
    iallreduce_sum(t)->wait(timeout, "allreduce (sum) across " + std::to_string(size()) + " ranks");
  }
  /// A new group of `ranks` (ranks of this group, ascending, distinct): every
  /// member calls it with the same ranks and `name`; the others may skip it
  /// and get null. Its rank i is ranks[i]. Throws InputError for bad ranks,
  /// CommError when members do not show up within `timeout`.
  virtual std::shared_ptr<Communicator> subgroup(const std::vector<int>& ranks,
                                                 const std::string& name,
                                                 std::chrono::milliseconds timeout) = 0;

  /// Records, for the other ranks to name in their own errors, that this
  /// rank's step failed with `what`; `origin`: the failure started here (not
  /// a peer's failure seen from here). Best effort, never throws; the
  /// default (a group without a store) records nothing.
  virtual void report_failure(const std::string& /*what*/, bool /*origin*/) noexcept {}
  /// What another rank recorded with report_failure(), the first rank where
  /// a failure started preferred: "rank 2 failed: ...". Empty when none did
  /// (or it cannot be read, e.g. rank 0, which serves the store, is gone).
  virtual std::string reported_failure() noexcept { return {}; }

  /// Forms the group: a TCPStore at MASTER_ADDR:MASTER_PORT (served by rank
  /// 0), every rank checking in, and a Gloo or NCCL process group, all
  /// within `timeout` in total (a rank that never starts fails every other
  /// rank within it, naming the missing ranks). Throws InputError for an
  /// unavailable backend, CommError when peers do not show up in time.
  static std::shared_ptr<Communicator> connect(const DistEnv& env, Backend backend,
                                               std::chrono::milliseconds timeout);
};

}  // namespace pipeplan::exec
