// Running the executor on a c10d process group the trainer already has (for
// example a pipeline slice of a larger world formed by its own launcher).
// Includes c10d headers; only code that holds c10d objects needs it.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "pipeplan/exec/comm.h"

namespace pipeplan::exec {

/// A Communicator over an existing process group: its rank and size are the
/// group's; tensors live on `device`. With the `store` the group was formed
/// on, subgroup() works too (Gloo subgroups bind 127.0.0.1 when MASTER_ADDR
/// is unset or a loopback address, the host's address otherwise).
std::shared_ptr<Communicator> wrap_process_group(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                 Backend backend, at::Device device,
                                                 c10::intrusive_ptr<c10d::Store> store = {});

}  // namespace pipeplan::exec
