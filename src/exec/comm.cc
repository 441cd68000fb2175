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
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "exec/boundary.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/c10d.h"

namespace pipeplan::exec {

namespace {

// c10::Error::what() carries a C++ backtrace; users want the message only.
using detail::message_of;

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

// A posted operation. Inside a coalesced batch (NCCL) the operation's own work
// may be null or not final: the batch's work, known at end_group(), completes
// it too.
using BatchWork = std::shared_ptr<c10::intrusive_ptr<c10d::Work>>;

// The peers this rank's transfers found gone: a send or receive that failed
// with an error (a closed or reset connection), not a timeout. A peer's
// process closes its connections only once it reported its failure (or was
// killed, and never will): rank 0 need not wait for its report.
class LostPeers {
 public:
  void add(int peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(peers_.begin(), peers_.end(), peer) == peers_.end()) peers_.push_back(peer);
  }
  std::vector<int> list() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peers_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<int> peers_;
};

class WorkOp : public PendingOp {
 public:
  WorkOp(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor, BatchWork batch = nullptr,
         int peer = -1, std::shared_ptr<LostPeers> lost = nullptr)
      : work_(std::move(work)),
        batch_(std::move(batch)),
        tensor_(std::move(tensor)),
        peer_(peer),
        lost_(std::move(lost)) {}

  void wait(std::chrono::milliseconds timeout, const std::string& what) override {
    wait_one(work_, timeout, what);
    if (batch_) wait_one(*batch_, timeout, what);
  }
  // NCCL's work knows (its CUDA events); Gloo's send learns it only in wait().
  bool done() override {
    return (!work_ || work_->isCompleted()) && (!batch_ || !*batch_ || (*batch_)->isCompleted());
  }

 private:
  // Throws CommError when the work failed or timed out; an error of this
  // operation's own work (a batch's names no one peer) marks its peer lost.
  void wait_one(c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
                const std::string& what) {
    if (!work) return;
    bool done = false;
    std::string error;
    try {
      done = work->wait(timeout);
    } catch (const std::exception& e) {
      error = message_of(e);
    }
    work.reset();
    if (!error.empty()) {
      if (lost_ && peer_ >= 0 && &work == &work_) lost_->add(peer_);
      throw CommError(what + " failed: " + error);
    }
    if (!done)
      throw CommError(what + ": timed out after " + std::to_string(timeout.count()) + " ms");
  }

  c10::intrusive_ptr<c10d::Work> work_;
  BatchWork batch_;
  at::Tensor tensor_;  // keeps the buffer alive while the operation is in flight
  int peer_;           // the send's or receive's peer; -1 for a collective
  std::shared_ptr<LostPeers> lost_;
};

// c10d (LibTorch >= 2.0): a backend (ProcessGroupGloo, ProcessGroupNCCL)
// serves a ProcessGroup for one device type; the ProcessGroup dispatches.
c10::intrusive_ptr<c10d::ProcessGroup> group_of(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int size, c10::DeviceType device,
                                                c10d::ProcessGroup::BackendType type,
                                                c10::intrusive_ptr<c10d::Backend> backend) {
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  pg->setBackend(device, type, backend);
  pg->setDefaultBackend(type);
  return pg;
}

// Runs `fn` (store calls) on a thread of its own and waits at most `limit`:
// nothing when it fails or has not answered by then. LibTorch 2.x's TCPStore
// client has no deadline on check()/set(), and the store lives in rank 0's
// process, so a stalled rank 0 would hold every peer's error report forever;
// the abandoned thread keeps what it captured alive and ends with the process.
template <class T>
std::optional<T> within(std::chrono::milliseconds limit, std::function<T()> fn) noexcept {
  try {
    auto task = std::make_shared<std::packaged_task<T()>>(std::move(fn));
    std::future<T> answer = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (answer.wait_for(limit) != std::future_status::ready) return std::nullopt;
    return answer.get();
  } catch (...) {  // NOLINT(bugprone-empty-catch): best effort, the step already failed
    return std::nullopt;
  }
}

// Builds a process group of the same backend over another store (subgroups).
using GroupFactory = std::function<c10::intrusive_ptr<c10d::ProcessGroup>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout)>;

class PgCommunicator : public Communicator {
 public:
  PgCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                 Backend backend, at::Device device, GroupFactory factory,
                 bool serves_store = false)
      : serves_store_(serves_store),
        store_(std::move(store)),
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
      return posted(pg_->send(v, peer, tag), t, peer);
    } catch (const std::exception& e) {
      throw CommError("posting a send to rank " + std::to_string(peer) + ": " + message_of(e));
    }
  }

  std::unique_ptr<PendingOp> irecv(const at::Tensor& t, int peer, int tag) override {
    std::vector<at::Tensor> v{t};
    try {
      return posted(pg_->recv(v, peer, tag), t, peer);
    } catch (const std::exception& e) {
      throw CommError("posting a receive from rank " + std::to_string(peer) + ": " + message_of(e));
    }
  }

  // c10d's coalescing, as torch's batch_isend_irecv does it: a backend that
  // supports it (NCCL: ncclGroupStart/End, one work for the batch) brackets
  // the operations; others (Gloo) post them one by one.
  void begin_group() override {
    if (grouping_) throw InternalError("a BATCH_P2P group opened inside another");
    grouping_ = true;
    batch_.reset();
    try {
      if (pg_->getBackend(device_.type())->supportsCoalescing()) {
        pg_->startCoalescing(device_.type());
        batch_ = std::make_shared<c10::intrusive_ptr<c10d::Work>>();
      }
    } catch (const std::exception& e) {
      grouping_ = false;
      throw CommError("starting a batch of sends and receives: " + message_of(e));
    }
  }

  void end_group() override {
    if (!grouping_) return;
    grouping_ = false;
    BatchWork batch = std::move(batch_);
    batch_.reset();
    if (!batch) return;
    try {
      *batch = pg_->endCoalescing(device_.type());
    } catch (const std::exception& e) {
      throw CommError("launching a batch of sends and receives: " + message_of(e));
    }
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

  void report_failure(const std::string& what, bool origin) noexcept override {
    if (!store_) return;
    const std::string text = std::string(origin ? "1" : "0") + what;
    // The report and, on rank 0, the wait for the peers' reports, within a
    // bound: a stalled rank 0 (its process serves the store) never answers.
    const auto linger = serves_store_ ? 2 * kLinger : kLinger;
    (void)within<bool>(
        linger, [store = store_, key = failure_key(rank_), text, serves = serves_store_,
                 rank = rank_, size = size_, lost = lost_->list()] {
          // The peers found gone first: rank 0 reads them with the report.
          for (int peer : lost) store->set(lost_key(peer), std::vector<std::uint8_t>{1});
          store->set(key, std::vector<std::uint8_t>(text.begin(), text.end()));
          // A set is not acknowledged; a check is, and the store serves one
          // client in order: the report is in before this rank goes on (exits).
          (void)store->check({key});
          if (serves) {
            // The store leaves with this process: wait until every peer has
            // reported (it read the others' reports first) or is known gone (a
            // killed rank never reports), at most kLinger. Polled with check():
            // a Store::wait() that times out makes LibTorch 2.x log socket
            // warnings.
            const auto until = std::chrono::steady_clock::now() + kLinger;
            auto settled = [&] {
              for (int r = 0; r < size; ++r)
                if (r != rank && !store->check({failure_key(r)}) && !store->check({lost_key(r)}))
                  return false;
              return true;
            };
            while (!settled() && std::chrono::steady_clock::now() < until)
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          return true;
        });
  }

  std::string reported_failure() noexcept override {
    if (!store_) return {};
    return within<std::string>(kLinger,
                               [store = store_, rank = rank_, size = size_] {
                                 std::string first;
                                 for (int r = 0; r < size; ++r) {
                                   if (r == rank || !store->check({failure_key(r)})) continue;
                                   const std::vector<std::uint8_t> v = store->get(failure_key(r));
                                   if (v.empty()) continue;
                                   const std::string text =
                                       "rank " + std::to_string(r) +
                                       " failed: " + std::string(v.begin() + 1, v.end());
                                   if (v[0] == '1') return text;
                                   if (first.empty()) first = text;
                                 }
                                 return first;
                               })
        .value_or(std::string());
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
      return std::make_shared<PgCommunicator>(store, pg, backend_, device_, factory_,
                                              serves_store_);
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

  static std::string failure_key(int rank) { return "pipeplan/failed/" + std::to_string(rank); }
  // Set by a rank whose transfer with `rank` failed with an error: `rank`
  // is gone (see LostPeers), and rank 0 does not wait for its report.
  static std::string lost_key(int rank) { return "pipeplan/lost/" + std::to_string(rank); }
  // The most rank 0 waits for the reports of live peers (a peer that
  // stalled, or fails on its own clock), and the bound of each store call.
  static constexpr std::chrono::milliseconds kLinger{2000};

  std::unique_ptr<PendingOp> posted(c10::intrusive_ptr<c10d::Work> work, const at::Tensor& t,
                                    int peer) {
    return std::make_unique<WorkOp>(std::move(work), t, grouping_ ? batch_ : nullptr, peer, lost_);
  }

  bool serves_store_;  // this process runs the TCPStore server
  std::shared_ptr<LostPeers> lost_ = std::make_shared<LostPeers>();
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  bool grouping_ = false;
  BatchWork batch_;  // the open coalesced batch's work, set at end_group()
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
    return group_of(store, rank, size, c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO,
                    c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts));
  };
}
#endif

#if defined(PIPEPLAN_EXEC_NCCL)
GroupFactory nccl_factory() {
  return [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
            std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::ProcessGroup> {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    return group_of(store, rank, size, c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL,
                    c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts));
  };
}
#endif

// Every rank checks in at the store before the process group forms, so
// forming it waits for no one and the whole connect() keeps one deadline.
// Ranks poll rather than block on the store: rank 0 serves it, and when it
// gives up it posts who is missing and waits (briefly) until the others
// have read it, so every rank fails with the same message.
std::string missing_ranks(c10d::Store& store, int world, const std::string& prefix,
                          std::chrono::milliseconds timeout) {
  std::string names;
  int n = 0;
  for (int r = 0; r < world; ++r)
    if (!store.check({prefix + std::to_string(r)})) {
      names += (names.empty() ? "" : ", ") + std::to_string(r);
      ++n;
    }
  return std::to_string(world - n) + " of " + std::to_string(world) +
         " ranks joined the group within " + std::to_string(timeout.count()) +
         " ms; missing: " + (n > 1 ? "ranks " : "rank ") + names;
}

void join_group(c10d::Store& store, const DistEnv& env,
                std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                const std::string& where) {
  using std::chrono::milliseconds;
  const std::string joined = "pipeplan/joined/", failed = "pipeplan/join-failed",
                    seen = "pipeplan/join-failure-seen/";
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(joined + std::to_string(r));
  auto refuse = [&](const std::string& why) {
    throw CommError(where + why + " (start WORLD_SIZE=" + std::to_string(env.world_size) +
                    " processes with the same MASTER_ADDR and MASTER_PORT)");
  };
  std::string why;
  try {
    store.set(keys[env.rank], std::vector<std::uint8_t>{1});
    while (!store.check(keys)) {
      if (env.rank != 0 && store.check({failed})) {
        const std::vector<std::uint8_t> v = store.get(failed);
        store.set(seen + std::to_string(env.rank), std::vector<std::uint8_t>{1});
        why = std::string(v.begin(), v.end());
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        why = missing_ranks(store, env.world_size, joined, timeout);
        // A rank that gave up on its own clock tells rank 0 not to wait for it.
        if (env.rank != 0) store.set(seen + std::to_string(env.rank), std::vector<std::uint8_t>{1});
        if (env.rank == 0) {
          store.set(failed, std::vector<std::uint8_t>(why.begin(), why.end()));
          const auto until = std::chrono::steady_clock::now() + milliseconds(1000);
          for (int r = 1; r < env.world_size; ++r)
            while (store.check({keys[r]}) && !store.check({seen + std::to_string(r)}) &&
                   std::chrono::steady_clock::now() < until)
              std::this_thread::sleep_for(milliseconds(10));
        }
        break;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  } catch (const std::exception& e) {
    throw CommError(where + "cannot check in with the other ranks at " + env.master_addr + ":" +
                    std::to_string(env.master_port) +
                    " (rank 0, which serves the store, may "
                    "have given up or failed): " +
                    message_of(e));
  }
  if (!why.empty()) refuse(why);
}

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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.master_port);
    opts.isServer = env.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(env.world_size);
    opts.waitWorkers = false;  // join_group() waits, naming who is missing
    opts.timeout = timeout;
    // LibTorch 2.15's client retries a connect that timed out once more after
    // a back-off (TCPStore.cpp, "retrying (try=0 ...)"), twice the timeout in
    // all: the connect runs on a thread of its own and is given up at the
    // deadline (the thread ends with the process).
    auto task = std::make_shared<std::packaged_task<c10::intrusive_ptr<c10d::Store>()>>(
        [addr = env.master_addr, opts]() -> c10::intrusive_ptr<c10d::Store> {
          return c10::make_intrusive<c10d::TCPStore>(addr, opts);
        });
    auto formed = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (formed.wait_until(deadline) != std::future_status::ready)
      throw std::runtime_error("no store answered at " + env.master_addr + ":" +
                               std::to_string(env.master_port) +
                               " (is rank 0 running with the same MASTER_ADDR and MASTER_PORT?)");
    store = formed.get();
  } catch (const std::exception& e) {
    throw CommError(where + "cannot form the store at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + " within " + std::to_string(timeout.count()) +
                    " ms: " + message_of(e));
  }
  join_group(*store, env, deadline, timeout, where);
  try {
#if defined(PIPEPLAN_EXEC_GLOO)
    if (backend == Backend::Gloo) {
      GroupFactory factory = gloo_factory(is_loopback(env.master_addr));
      auto pg = factory(store, env.rank, env.world_size, timeout);
      return std::make_shared<PgCommunicator>(store, pg, backend, at::Device(at::kCPU),
                                              std::move(factory), env.rank == 0);
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
          std::move(factory), env.rank == 0);
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
