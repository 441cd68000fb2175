// Test helper: a one-rank Gloo group on a free loopback port, made once per
// test binary, for the in-process executor tests.
#pragma once

#include <ATen/Parallel.h>

#include <chrono>
#include <memory>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/launch.h"

namespace pipeplan::test {

inline std::shared_ptr<exec::Communicator> solo_group() {
  static std::shared_ptr<exec::Communicator> comm = [] {
    at::set_num_threads(1);
    exec::DistEnv env;
    env.master_port = exec::free_loopback_port();
    return exec::Communicator::connect(env, exec::Backend::Gloo, std::chrono::seconds(30));
  }();
  return comm;
}

}  // namespace pipeplan::test
