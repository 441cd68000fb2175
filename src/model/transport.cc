// The transport models' names and the runtimes table. Each runtime row was
// re-derived from the runtime's own source, named in the row (docs/semantics.md
// has the table and the reasoning).
#include "pipeplan/transport.h"

#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan {

std::string_view to_string(Transport t) { return transport_model(t).name; }

std::optional<Transport> parse_transport(std::string_view s) {
  for (const TransportModel& m : kTransportModels)
    if (m.name == s) return m.id;
  return std::nullopt;
}

namespace {

template <class Rows, class Name>
std::string join_names(const Rows& rows, Name name, std::string_view sep, std::string_view last) {
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += (i + 1 == rows.size() && !last.empty()) ? last : sep;
    out += name(rows[i]);
  }
  return out;
}

constexpr RunRules kPostedApart{Waits::BeforeUse, true};  // torch on NCCL
constexpr RunRules kWaitedApart{Waits::AtPost, true};
constexpr RunRules kWaitedTogether{Waits::AtPost, false};
constexpr RunRules kPostedTogether{Waits::BeforeUse, false};

const std::vector<Runtime> kRuntimes = {
    {"torch-2.11",
     {},
     Transport::Serial,
     kPostedApart,
     "torch.distributed.pipelining's schedule runtime up to 2.11: every SEND/RECV list goes "
     "through batch_isend_irecv, so NCCL coalescing puts all of a rank's transfers on the "
     "pipeline group's one communicator",
     "torch 2.6.0-2.11 torch/distributed/pipelining/schedules.py: _batch_p2p returns "
     "dist.batch_isend_irecv(p2p_ops)"},
    {"torch",
     {},
     Transport::Rendezvous,
     kPostedApart,
     "torch.distributed.pipelining's schedule runtime from 2.12: an all-send or all-recv list "
     "posted as plain isend/irecv (pair communicators), a mixed one as batch_isend_irecv (the "
     "group's communicator); receives waited before use",
     "torch 2.15.0 torch/distributed/pipelining/schedules.py: _batch_p2p"},
    {"megatron",
     {},
     Transport::Rendezvous,
     kWaitedTogether,
     "Megatron-Core without batch_p2p_comm: each call's isend/irecv posted on pair "
     "communicators, even and odd ranks in opposite orders, waited right after the call",
     "megatron-core 0.16.1 megatron/core/pipeline_parallel/p2p_communication.py: _p2p_ops, "
     "_communicate(wait_on_reqs=True)"},
    {"megatron-batched",
     {},
     Transport::Serial,
     kWaitedApart,
     "Megatron-Core with batch_p2p_comm (the default): every call, one operation included, "
     "is one batch_isend_irecv on the pipeline group's communicator, waited right after",
     "megatron-core 0.16.1 megatron/core/pipeline_parallel/p2p_communication.py: "
     "_batched_p2p_ops, _communicate (assert wait_on_reqs)"},
    {"megatron-overlap",
     {},
     Transport::Rendezvous,
     kPostedTogether,
     "Megatron-Core interleaved with overlap_p2p_comm: isend/irecv on pair communicators, "
     "waited only before the compute that reads them",
     "megatron-core 0.16.1 megatron/core/pipeline_parallel/p2p_communication.py: "
     "send_forward_recv_forward(overlap_p2p_comm) -> _communicate(wait_on_reqs=False)"},
    {"deepspeed",
     {},
     Transport::Serial,
     kWaitedTogether,
     "DeepSpeed's pipeline engine: blocking send/recv in instruction order",
     "deepspeed 0.19.8 deepspeed/runtime/pipe/p2p.py: send/recv assert async_op == False and "
     "call dist.send/dist.recv"},
    {"dualpipe",
     {"dualpipev"},
     Transport::Serial,
     kWaitedTogether,
     "DeepSeek's DualPipe and DualPipeV: sends and receives accumulated and committed as one "
     "batch_isend_irecv, waited at once; every plain cell is committed and waited where it "
     "stands",
     "deepseek-ai/DualPipe dualpipe/dualpipe.py (bb214e8): _commit_and_wait_comm"},
    {"pipeplan-gloo",
     {},
     Transport::Rendezvous,
     kPostedTogether,
     "pipeplan's executor on Gloo: single sends and receives per pair, a group's members "
     "posted one by one (Gloo does not coalesce) and waited together",
     "src/exec/transfers.cc, transfer_groups.cc (supportsCoalescing() false)"},
    {"pipeplan-nccl",
     {},
     Transport::Rendezvous,
     kPostedApart,
     "pipeplan's executor on NCCL: singles on pair communicators, a group coalesced on the "
     "process group's communicator",
     "src/exec/transfers.cc, transfer_groups.cc (coalescing where supportsCoalescing())"},
};

}  // namespace

std::string transport_names(std::string_view sep, std::string_view last) {
  return join_names(
      kTransportModels, [](const TransportModel& m) { return std::string(m.name); }, sep, last);
}

const std::vector<Runtime>& runtimes() { return kRuntimes; }

namespace {
const Runtime* lookup(std::string_view name) {
  for (const Runtime& r : kRuntimes) {
    if (r.name == name) return &r;
    for (std::string_view a : r.aliases)
      if (a == name) return &r;
  }
  return nullptr;
}
}  // namespace

std::optional<Runtime> find_runtime(std::string_view name) {
  const Runtime* r = lookup(name);
  return r ? std::optional<Runtime>(*r) : std::nullopt;
}

const Runtime& runtime_named(std::string_view name) {
  if (const Runtime* r = lookup(name)) return *r;
  throw InputError("unknown runtime '" + limits::excerpt(name) + "' (runtimes: " + runtime_names() +
                   "; `pipeplan verify --runtime list` describes them)");
}

std::string runtime_names() {
  return join_names(kRuntimes, [](const Runtime& r) { return std::string(r.name); }, ", ", {});
}

}  // namespace pipeplan
