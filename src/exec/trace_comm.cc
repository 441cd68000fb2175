// Tracer: the communicator as the tracer sees it (posts and waits timed and
// watched), the clock offset to rank 0, and gathering the ranks' records.
#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <tuple>

#include "exec/trace_state.h"
#include "pipeplan/exec/log.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {
namespace {

using State = Tracer::State;

// An operation posted through the tracer: its wait is timed, attributed to
// the action that posted it, and watched.
class TracedOp : public PendingOp {
 public:
  TracedOp(std::unique_ptr<PendingOp> inner, std::shared_ptr<State> s, long owner, std::string peer)
      : inner_(std::move(inner)),
        s_(std::move(s)),
        owner_(owner),
        step_(s_->traced_steps),
        peer_(std::move(peer)) {}

  void wait(std::chrono::milliseconds timeout, const std::string& what) override {
    const double t0 = s_->now_ms();
    s_->begin_wait(s_->describe(owner_, peer_));
    try {
      inner_->wait(timeout, what);
    } catch (...) {
      s_->end_wait();
      throw;
    }
    s_->end_wait();
    s_->waited(owner_, step_, t0, s_->now_ms());
  }
  bool done() override { return inner_->done(); }

 private:
  std::unique_ptr<PendingOp> inner_;
  std::shared_ptr<State> s_;
  long owner_;
  int step_;
  std::string peer_;
};

class TracedComm : public Communicator {
 public:
  TracedComm(std::shared_ptr<Communicator> inner, std::shared_ptr<State> s)
      : inner_(std::move(inner)), s_(std::move(s)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Backend backend() const override { return inner_->backend(); }
  at::Device device() const override { return inner_->device(); }
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int peer, int tag) override {
    return traced(inner_->isend(t, peer, tag), "rank " + std::to_string(peer));
  }
  std::unique_ptr<PendingOp> irecv(const at::Tensor& t, int peer, int tag) override {
    return traced(inner_->irecv(t, peer, tag), "rank " + std::to_string(peer));
  }
  void begin_group() override { inner_->begin_group(); }
  void end_group() override { inner_->end_group(); }
  void allreduce_max(at::Tensor& t, std::chrono::milliseconds timeout) override {
    watched("allreduce across " + std::to_string(size()) + " ranks",
            [&] { inner_->allreduce_max(t, timeout); });
  }
  void barrier(std::chrono::milliseconds timeout) override {
    watched("barrier across " + std::to_string(size()) + " ranks",
            [&] { inner_->barrier(timeout); });
  }
  std::unique_ptr<PendingOp> iallreduce_sum(const at::Tensor& t) override {
    return std::make_unique<TracedOp>(inner_->iallreduce_sum(t), s_, -1,
                                      "allreduce across " + std::to_string(size()) + " ranks");
  }
  void report_failure(const std::string& what, bool origin) noexcept override {
    inner_->report_failure(what, origin);
  }
  std::string reported_failure() noexcept override { return inner_->reported_failure(); }
  std::shared_ptr<Communicator> subgroup(const std::vector<int>& ranks, const std::string& name,
                                         std::chrono::milliseconds timeout) override {
    return inner_->subgroup(ranks, name, timeout);
  }

 private:
  std::unique_ptr<PendingOp> traced(std::unique_ptr<PendingOp> op, std::string peer) {
    return std::make_unique<TracedOp>(std::move(op), s_, s_->owner_of_post(), std::move(peer));
  }
  void watched(const std::string& peer, const std::function<void()>& f) {
    s_->begin_wait(s_->describe(-1, peer));
    try {
      f();
    } catch (...) {
      s_->end_wait();
      throw;
    }
    s_->end_wait();
  }

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<State> s_;
};

at::TensorOptions on(const Communicator& c, at::ScalarType t) {
  return at::TensorOptions().dtype(t).device(c.device());
}

// Whether every rank runs on this host (one monotonic clock): the hash of
// the host name is equal everywhere when its maximum and minimum agree.
bool one_host(Communicator& c, std::chrono::milliseconds timeout) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const auto h = static_cast<std::int64_t>(std::hash<std::string>{}(name) >> 2);
  at::Tensor t = at::tensor({h, -h}, on(c, at::kLong).device(at::kCPU)).to(c.device());
  c.allreduce_max(t, timeout);
  at::Tensor back = t.to(at::kCPU);
  return back[0].item<std::int64_t>() == -back[1].item<std::int64_t>();
}

// NTP-style: rank r sends its time, rank 0 answers with its own, r halves the
// round trip; the sample with the shortest round trip wins.
double estimate_offset(Communicator& c, std::chrono::milliseconds timeout) {
  constexpr int kRounds = 8;
  const int n = c.size(), me = c.rank();
  double best_rtt = std::numeric_limits<double>::infinity(), offset = 0.0;
  for (int r = 1; r < n; ++r)
    for (int k = 0; k < kRounds; ++k) {
      at::Tensor msg = at::zeros({1}, on(c, at::kDouble));
      if (me == 0) {
        c.irecv(msg, r, 7)->wait(timeout, "clock sync with rank " + std::to_string(r));
        msg.fill_(State::ms(std::chrono::steady_clock::now()));
        c.isend(msg, r, 8)->wait(timeout, "clock sync with rank " + std::to_string(r));
      } else if (me == r) {
        const double t1 = State::ms(std::chrono::steady_clock::now());
        msg.fill_(t1);
        c.isend(msg, 0, 7)->wait(timeout, "clock sync with rank 0");
        c.irecv(msg, 0, 8)->wait(timeout, "clock sync with rank 0");
        const double t3 = State::ms(std::chrono::steady_clock::now());
        const double t2 = msg.to(at::kCPU).item<double>();
        if (t3 - t1 < best_rtt) best_rtt = t3 - t1, offset = t2 - (t1 + t3) / 2;
      }
    }
  return offset;
}

// step, index, type, stage, mb, sub_stage, sub_mb, start, end, wait, bytes, post, held, peak
constexpr int kFields = 14;

}  // namespace

std::shared_ptr<Communicator> Tracer::wrap(std::shared_ptr<Communicator> comm) {
  if (!comm) throw InputError("Tracer::wrap: no communicator");
  State& s = *state_;
  s.rank = comm->rank();
  const std::chrono::milliseconds timeout(60000);
  if (comm->size() > 1) {
    const bool same_host = one_host(*comm, timeout);
    s.offset_ms = same_host ? 0.0 : estimate_offset(*comm, timeout);
    if (log_debug_enabled()) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.3f", s.offset_ms);
      log_debug("rank " + std::to_string(s.rank) + ": clock offset to rank 0: " + ms +
                        " ms" + (same_host ? " (one host, one clock)" : " (estimated)"));
    }
  }
  s.start_watchdog();
  s.group = comm;
  return std::make_shared<TracedComm>(std::move(comm), state_);
}

std::optional<Trace> Tracer::gather(const std::string& source, std::chrono::milliseconds timeout) {
  State& s = *state_;
  if (!s.have_plan)
    throw InputError("Tracer::gather: the tracer was never attached to an executor");
  if (!s.group) throw InputError("Tracer::gather: wrap() the communicator first");
  Communicator& c = *s.group;  // the group itself: gathering is not traced
  const int me = c.rank(), n = c.size();
  auto pack = [&](const std::vector<TraceRecord>& recs) {
    at::Tensor t = at::empty({static_cast<std::int64_t>(recs.size()), kFields}, at::kDouble);
    auto a = t.accessor<double, 2>();
    for (std::size_t k = 0; k < recs.size(); ++k) {
      const TraceRecord& r = recs[k];
      const double v[kFields] = {double(r.step),
                                 double(r.index),
                                 double(static_cast<int>(r.action.type)),
                                 double(r.action.stage),
                                 double(r.action.microbatch),
                                 double(r.action.sub_stage),
                                 double(r.action.sub_microbatch),
                                 r.start,
                                 r.end,
                                 r.wait,
                                 double(r.bytes),
                                 r.post,
                                 double(r.held),
                                 double(r.peak)};
      for (int f = 0; f < kFields; ++f) a[static_cast<std::int64_t>(k)][f] = v[f];
    }
    return t;
  };
  if (me != 0) {
    at::Tensor count = at::full({1}, static_cast<std::int64_t>(s.done.size()), on(c, at::kLong));
    c.isend(count, 0, 5)->wait(timeout, "sending the trace to rank 0");
    if (!s.done.empty()) {
      at::Tensor data = pack(s.done).to(c.device());
      c.isend(data, 0, 6)->wait(timeout, "sending the trace to rank 0");
    }
    return std::nullopt;
  }
  Trace t;
  t.plan = s.whole;
  t.source = source;
  t.records = s.done;
  for (int r = 1; r < n; ++r) {
    at::Tensor count = at::zeros({1}, on(c, at::kLong));
    c.irecv(count, r, 5)->wait(timeout, "receiving the trace of rank " + std::to_string(r));
    const std::int64_t m = count.to(at::kCPU).item<std::int64_t>();
    if (m <= 0) continue;
    at::Tensor data = at::empty({m, kFields}, on(c, at::kDouble));
    c.irecv(data, r, 6)->wait(timeout, "receiving the trace of rank " + std::to_string(r));
    at::Tensor cpu = data.to(at::kCPU);
    auto a = cpu.accessor<double, 2>();
    for (std::int64_t k = 0; k < m; ++k) {
      TraceRecord rec;
      rec.step = static_cast<int>(a[k][0]);
      rec.rank = r;
      rec.index = static_cast<int>(a[k][1]);
      rec.action = Action{static_cast<ActionType>(static_cast<int>(a[k][2])),
                          static_cast<std::int32_t>(a[k][3]), static_cast<std::int32_t>(a[k][4]),
                          static_cast<std::int32_t>(a[k][5]), static_cast<std::int32_t>(a[k][6])};
      rec.start = a[k][7];
      rec.end = a[k][8];
      rec.wait = a[k][9];
      rec.bytes = static_cast<std::int64_t>(a[k][10]);
      rec.post = a[k][11];
      rec.held = static_cast<std::int64_t>(a[k][12]);
      rec.peak = static_cast<std::int64_t>(a[k][13]);
      t.records.push_back(rec);
    }
  }
  double origin = std::numeric_limits<double>::infinity();
  for (const TraceRecord& r : t.records) origin = std::min(origin, r.start);
  for (TraceRecord& r : t.records) r.start -= origin, r.end -= origin;
  std::sort(t.records.begin(), t.records.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return std::tie(a.step, a.rank, a.index) < std::tie(b.step, b.rank, b.index);
  });
  return t;
}

}  // namespace pipeplan::exec
