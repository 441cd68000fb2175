// c10d process groups behind the Communicator interface. The only file that
// includes c10d headers, so their compile cost is paid once.
#include "pipeplan/exec/comm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define PIPEPLAN_EXEC_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL)
#define PIPEPLAN_EXEC_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>

#include "pipeplan/error.h"
#include "pipeplan/exec/c10d.h"

namespace pipeplan::exec {

namespace {

// c10::Error::what() carries a C++ backtrace; users want the message only.
std::string message_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

int env_int(const char* name, bool required, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) throw InputError(std::string("environment variable ") + name + " is not set");
    return fallback;
  }
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > std::numeric_limits<int>::max())
    throw InputError(std::string("environment variable ") + name + "='" + v +
                     "' is not a non-negative integer");
  return static_cast<int>(x);
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

class WorkOp : public PendingOp {
 public:
  WorkOp(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor)
      : work_(std::move(work)), tensor_(std::move(tensor)) {}

  void wait(std::chrono::milliseconds timeout, const std::string& what) override {
    if (!work_) return;
    bool done = false;
    try {
      done = work_->wait(timeout);
    } catch (const std::exception& e) {
      work_.reset();
      throw CommError(what + " failed: " + message_of(e));
    }
    work_.reset();
    if (!done)
      throw CommError(what + ": timed out after " + std::to_string(timeout.count()) + " ms");
  }
  // NCCL's work knows (its CUDA events); Gloo's send learns it only in wait().
  bool done() override { return !work_ || work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // keeps the buffer alive while the operation is in flight
};

// Builds a process group of the same backend over another store (subgroups).
using GroupFactory = std::function<c10::intrusive_ptr<c10d::ProcessGroup>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout)>;

class PgCommunicator : public Communicator {
 public:
  PgCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                 Backend backend, at::Device device, GroupFactory factory)
      : store_(std::move(store)),
        pg_(std::move(pg)),
        rank_(pg_->getRank()),
        size_(pg_->getSize()),
        backend_(backend),
        device_(device),
        factory_(std::move(factory)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return backend_; }
  at::Device device() const override { return device_; }

  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int peer, int tag) override {
    std::vector<at::Tensor> v{t};
    try {
      return posted(pg_->send(v, peer, tag), t);
    } catch (const std::exception& e) {
      throw CommError("posting a send to rank " + std::to_string(peer) + ": " + message_of(e));
    }
  }

  std::unique_ptr<PendingOp> irecv(const at::Tensor& t, int peer, int tag) override {
    std::vector<at::Tensor> v{t};
    try {
      return posted(pg_->recv(v, peer, tag), t);
    } catch (const std::exception& e) {
      throw CommError("posting a receive from rank " + std::to_string(peer) + ": " + message_of(e));
    }
  }

  // c10d's coalescing: ProcessGroupNCCL brackets the operations with
  // ncclGroupStart/ncclGroupEnd (endCoalescing wants the works posted in
  // between); the base ProcessGroup, Gloo's, does nothing.
  void begin_group() override {
    if (grouping_) throw InternalError("a BATCH_P2P group opened inside another");
    grouping_ = true;
    group_works_.clear();
    try {
      pg_->startCoalescing();
    } catch (const std::exception& e) {
      grouping_ = false;
      throw CommError("starting a batch of sends and receives: " + message_of(e));
    }
  }

  void end_group() override {
    if (!grouping_) return;
    grouping_ = false;
    try {
      pg_->endCoalescing(group_works_);
    } catch (const std::exception& e) {
      group_works_.clear();
      throw CommError("launching a batch of sends and receives: " + message_of(e));
    }
    group_works_.clear();
  }

  void allreduce_max(at::Tensor& t, std::chrono::milliseconds timeout) override {
    post_allreduce(t, c10d::ReduceOp::MAX)
        ->wait(timeout, "allreduce across " + std::to_string(size_) + " ranks");
  }

  std::unique_ptr<PendingOp> iallreduce_sum(const at::Tensor& t) override {
    return post_allreduce(t, c10d::ReduceOp::SUM);
  }

  void barrier(std::chrono::milliseconds timeout) override {
    // An allreduce rather than pg->barrier(): NCCL's barrier guesses a device.
    at::Tensor t = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(device_));
    allreduce_max(t, timeout);
  }

  std::shared_ptr<Communicator> subgroup(const std::vector<int>& ranks, const std::string& name,
                                         std::chrono::milliseconds timeout) override {
    if (ranks.empty()) throw InputError("a subgroup needs at least one rank");
    for (std::size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] < 0 || ranks[i] >= size_ || (i > 0 && ranks[i] <= ranks[i - 1]))
        throw InputError("subgroup '" + name + "': ranks must be distinct, ascending and below " +
                         std::to_string(size_));
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return nullptr;
    if (!store_ || !factory_)
      throw InputError(
          "this communicator wraps a process group without its store; pass the "
          "store to wrap_process_group() to form subgroups");
    const int sub_rank = static_cast<int>(it - ranks.begin());
    try {
      auto store = c10::make_intrusive<c10d::PrefixStore>("pipeplan/" + name, store_);
      auto pg = factory_(store, sub_rank, static_cast<int>(ranks.size()), timeout);
      return std::make_shared<PgCommunicator>(store, pg, backend_, device_, factory_);
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank_) + ": cannot form subgroup '" + name +
                      "' of " + std::to_string(ranks.size()) + " ranks: " + message_of(e));
    }
  }

 private:
  std::unique_ptr<PendingOp> post_allreduce(const at::Tensor& t, c10d::ReduceOp op) {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    try {
      return std::make_unique<WorkOp>(pg_->allreduce(v, opts), t);
    } catch (const std::exception& e) {
      throw CommError("allreduce: " + message_of(e));
    }
  }

  std::unique_ptr<PendingOp> posted(c10::intrusive_ptr<c10d::Work> work, const at::Tensor& t) {
    if (grouping_) group_works_.push_back(work);
    return std::make_unique<WorkOp>(std::move(work), t);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  bool grouping_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> group_works_;  // posted since begin_group()
  int rank_, size_;
  Backend backend_;
  at::Device device_;
  GroupFactory factory_;
};

#if defined(PIPEPLAN_EXEC_GLOO)
GroupFactory gloo_factory(bool loopback) {
  return [loopback](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::ProcessGroup> {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
  };
}
#endif

#if defined(PIPEPLAN_EXEC_NCCL)
GroupFactory nccl_factory() {
  return [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
            std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::ProcessGroup> {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
  };
}
#endif

}  // namespace

std::string_view to_string(Backend b) { return b == Backend::Gloo ? "gloo" : "nccl"; }

std::optional<Backend> parse_backend(std::string_view s) {
  if (s == "gloo") return Backend::Gloo;
  if (s == "nccl") return Backend::Nccl;
  return std::nullopt;
}

bool backend_available(Backend b) {
#if defined(PIPEPLAN_EXEC_GLOO)
  if (b == Backend::Gloo) return true;
#endif
#if defined(PIPEPLAN_EXEC_NCCL)
  if (b == Backend::Nccl) return true;
#endif
  (void)b;
  return false;
}

bool DistEnv::present() {
  const char* r = std::getenv("RANK");
  const char* w = std::getenv("WORLD_SIZE");
  return r != nullptr && *r != '\0' && w != nullptr && *w != '\0';
}

DistEnv DistEnv::from_environment() {
  DistEnv env;
  env.rank = env_int("RANK", true, 0);
  env.world_size = env_int("WORLD_SIZE", true, 1);
  env.local_rank = env_int("LOCAL_RANK", false, env.rank);
  env.master_port = env_int("MASTER_PORT", false, 29500);
  if (const char* a = std::getenv("MASTER_ADDR"); a != nullptr && *a != '\0') env.master_addr = a;
  if (env.world_size < 1) throw InputError("WORLD_SIZE must be at least 1");
  if (env.rank >= env.world_size)
    throw InputError("RANK=" + std::to_string(env.rank) +
                     " is not below WORLD_SIZE=" + std::to_string(env.world_size));
  if (env.master_port < 1 || env.master_port > 65535)
    throw InputError("MASTER_PORT=" + std::to_string(env.master_port) + " is not a TCP port");
  return env;
}

std::shared_ptr<Communicator> Communicator::connect(const DistEnv& env, Backend backend,
                                                    std::chrono::milliseconds timeout) {
  if (!backend_available(backend))
    throw InputError("backend '" + std::string(to_string(backend)) +
                     "' is not available in this LibTorch build" +
                     (backend == Backend::Nccl ? " (NCCL needs a CUDA LibTorch)" : ""));
  const std::string where = "rank " + std::to_string(env.rank) + ": ";
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.master_port);
    opts.isServer = env.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(env.world_size);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  } catch (const std::exception& e) {
    throw CommError(where + "cannot form the store at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + ": " + message_of(e));
  }
  try {
#if defined(PIPEPLAN_EXEC_GLOO)
    if (backend == Backend::Gloo) {
      GroupFactory factory = gloo_factory(is_loopback(env.master_addr));
      auto pg = factory(store, env.rank, env.world_size, timeout);
      return std::make_shared<PgCommunicator>(store, pg, backend, at::Device(at::kCPU),
                                              std::move(factory));
    }
#endif
#if defined(PIPEPLAN_EXEC_NCCL)
    if (backend == Backend::Nccl) {
      // Blocking waits make Work::wait honour its timeout instead of only
      // ordering streams; must be set before the group exists.
      setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 0);
      setenv("NCCL_BLOCKING_WAIT", "1", 0);
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
      GroupFactory factory = nccl_factory();
      auto pg = factory(store, env.rank, env.world_size, timeout);
      return std::make_shared<PgCommunicator>(
          store, pg, backend, at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank)),
          std::move(factory));
    }
#endif
  } catch (const std::exception& e) {
    throw CommError(where + "cannot form the " + std::string(to_string(backend)) +
                    " process group of " + std::to_string(env.world_size) +
                    " ranks: " + message_of(e));
  }
  throw InternalError("backend_available() and connect() disagree");
}

}  // namespace pipeplan::exec

namespace pipeplan::exec {

std::shared_ptr<Communicator> wrap_process_group(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                 Backend backend, at::Device device,
                                                 c10::intrusive_ptr<c10d::Store> store) {
  if (!group) throw InputError("wrap_process_group: no process group given");
  GroupFactory factory;
#if defined(PIPEPLAN_EXEC_GLOO)
  if (backend == Backend::Gloo) {
    const char* addr = std::getenv("MASTER_ADDR");
    factory = gloo_factory(addr == nullptr || *addr == '\0' || is_loopback(addr));
  }
#endif
#if defined(PIPEPLAN_EXEC_NCCL)
  if (backend == Backend::Nccl) factory = nccl_factory();
#endif
  if (!store) factory = nullptr;
  return std::make_shared<PgCommunicator>(std::move(store), std::move(group), backend, device,
                                          std::move(factory));
}

}  // namespace pipeplan::exec
