// Shared (tied) parameters (ties.h).
#include "exec/ties.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <set>

#include "exec/boundary.h"
#include "pipeplan/error.h"

namespace pipeplan::exec::detail {

namespace {

constexpr std::int64_t kAbsent = std::numeric_limits<std::int64_t>::min();

// FNV-1a over a tensor's shape and bytes, as a non-negative int64.
std::int64_t checksum(const at::Tensor& t) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  };
  for (std::int64_t d : t.sizes()) mix(&d, sizeof d);
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  mix(c.data_ptr(), c.nbytes());
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace

Ties::Ties(const PlanMeta& meta, int rank, const std::vector<Tie>& ties)
    : ties_(ties), rank_(rank) {
  std::set<std::string> names;
  for (Tie& t : ties_) {
    if (t.name.empty()) throw InputError("ExecOptions::ties: a tie without a name");
    if (!names.insert(t.name).second)
      throw InputError("ExecOptions::ties: tie '" + t.name + "' is declared twice");
    std::sort(t.stages.begin(), t.stages.end());
    if (t.stages.size() < 2 ||
        std::adjacent_find(t.stages.begin(), t.stages.end()) != t.stages.end())
      throw InputError("ExecOptions::ties: tie '" + t.name +
                       "' needs at least two distinct stages");
    for (int s : t.stages)
      if (s < 0 || s >= meta.num_stages())
        throw InputError("ExecOptions::ties: tie '" + t.name + "' names stage " +
                         std::to_string(s) + " but the plan has stages 0.." +
                         std::to_string(meta.num_stages() - 1));
    bool spans = false;
    for (int s : t.stages) spans = spans || meta.rank_of(s) != meta.rank_of(t.stages.front());
    spans_ranks_.push_back(spans);
  }
  copies_.resize(ties_.size());
  numel_.assign(ties_.size(), 0);
  dtype_.assign(ties_.size(), at::kFloat);
}

void Ties::attach(int stage, const std::map<std::string, at::Tensor>& tied, LocalStages& stages) {
  for (std::size_t t = 0; t < ties_.size(); ++t) {
    const Tie& tie = ties_[t];
    if (std::find(tie.stages.begin(), tie.stages.end(), stage) == tie.stages.end()) continue;
    auto it = tied.find(tie.name);
    if (it == tied.end())
      throw InputError("stage " + std::to_string(stage) + " is in tie '" + tie.name +
                       "' but its StageModule::tied has no entry '" + tie.name +
                       "' (the stage's copy of the shared parameter)");
    const std::vector<at::Tensor>& trainable = stages.trainable(stage);
    std::size_t index = trainable.size();
    for (std::size_t i = 0; i < trainable.size(); ++i)
      if (trainable[i].is_same(it->second)) index = i;
    if (index == trainable.size())
      throw InputError("stage " + std::to_string(stage) + ": the copy of tied parameter '" +
                       tie.name +
                       "' is not among the stage's trainable parameters; list it in "
                       "StageModule::parameters (with requires_grad)");
    std::vector<Copy>& copies = copies_[t];
    copies.erase(std::remove_if(copies.begin(), copies.end(),
                                [stage](const Copy& c) { return c.stage == stage; }),
                 copies.end());
    copies.push_back({stage, index});
    stages.hold(stage, index);
  }
}

void Ties::check_identical(Communicator& comm, const LocalStages& stages,
                           std::chrono::milliseconds timeout) {
  constexpr int kSlots = 6;  // numel, dtype and checksum, each with its negation
  std::vector<std::int64_t> v(ties_.size() * kSlots, kAbsent);
  for (std::size_t t = 0; t < ties_.size(); ++t) {
    const std::vector<Copy>& copies = copies_[t];
    if (copies.empty()) continue;
    const at::Tensor& p = stages.trainable(copies.front().stage)[copies.front().index];
    const std::int64_t numel = p.numel(), dtype = static_cast<std::int64_t>(p.scalar_type());
    const std::int64_t sum = checksum(p);
    for (const Copy& c : copies)
      if (checksum(stages.trainable(c.stage)[c.index]) != sum)
        throw InputError(me() + "the copies of tied parameter '" + ties_[t].name + "' on stages " +
                         std::to_string(copies.front().stage) + " and " + std::to_string(c.stage) +
                         " differ; initialise every copy identically before the first step");
    const std::int64_t mine[kSlots] = {numel, -numel, dtype, -dtype, sum, -sum};
    std::copy(mine, mine + kSlots, v.begin() + static_cast<std::ptrdiff_t>(t * kSlots));
  }
  at::Tensor all = at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(comm.device());
  comm.allreduce_max(all, timeout);
  all = all.to(at::kCPU);
  auto at_ = [&all](std::size_t i) {
    return all[static_cast<std::int64_t>(i)].item<std::int64_t>();
  };
  for (std::size_t t = 0; t < ties_.size(); ++t) {
    const std::size_t o = t * kSlots;
    const std::string which =
        "tied parameter '" + ties_[t].name + "' (stages " + join(ties_[t].stages) + ")";
    if (at_(o) != -at_(o + 1) || at_(o + 2) != -at_(o + 3))
      throw InputError(me() + "the copies of " + which +
                       " differ in size or dtype between ranks; every copy must have the "
                       "same shape and dtype");
    if (at_(o + 4) != -at_(o + 5))
      throw InputError(me() + "the copies of " + which +
                       " differ between ranks (their checksums differ); initialise every copy "
                       "identically (the same seed, or one copy's values copied into the "
                       "others) before the first step");
    numel_[t] = at_(o);
    dtype_[t] = static_cast<at::ScalarType>(at_(o + 2));
  }
  checked_ = true;
}

void Ties::reduce(Communicator& comm, LocalStages& stages, std::chrono::milliseconds timeout) {
  for (std::size_t t = 0; t < ties_.size(); ++t) {
    at::Tensor sum;
    for (const Copy& c : copies_[t]) {
      at::Tensor g = stages.take_held(c.stage, c.index);
      if (!g.defined()) continue;
      sum = sum.defined() ? sum.add_(g) : std::move(g);
    }
    if (spans_ranks_[t]) {
      sum = sum.defined() ? sum.reshape({-1}).contiguous().to(comm.device())
                          : at::zeros({numel_[t]},
                                      at::TensorOptions().dtype(dtype_[t]).device(comm.device()));
      comm.iallreduce_sum(sum)->wait(timeout, me() + "summing the gradient of tied parameter '" +
                                                  ties_[t].name + "' across the ranks of stages " +
                                                  join(ties_[t].stages));
    }
    if (!sum.defined()) continue;   // every copy opted out and got none
    std::vector<const void*> done;  // one tensor two local stages share gets the sum once
    for (const Copy& c : copies_[t]) {
      const at::Tensor& p = stages.trainable(c.stage)[c.index];
      if (std::find(done.begin(), done.end(), p.unsafeGetTensorImpl()) != done.end()) continue;
      done.push_back(p.unsafeGetTensorImpl());
      at::Tensor add = sum.view(p.sizes()).to(p.device());
      at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
      if (g.defined()) g.add_(add);
      else g = add.clone();
    }
  }
}

std::string Ties::describe() const {
  std::string s;
  for (const Tie& t : ties_) s += "'" + t.name + "' (" + join(t.stages) + ");";
  return s;
}

}  // namespace pipeplan::exec::detail
