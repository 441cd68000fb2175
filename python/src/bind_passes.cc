// The compiler chain: schedules(), plan(), lower(), verify(), check(), and
// reading plans (loads(), read()). Each call is one public C++ entry point,
// run without the GIL.
#include <pybind11/stl.h>

#include "common.h"
#include "frontend/read_file.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"

namespace pipeplan::python {
namespace {

using Release = py::gil_scoped_release;

// plan(): the CLI's `plan` with the same choices (one schedule lookup).
Plan make_plan(const std::string& schedule, const py::object& pp_arg, const py::object& m_arg,
               const py::object& v_arg, const py::object& rank_arg, bool compute_only,
               bool forward_only, const py::object& lowering, const py::object& prefetch,
               const py::object& serial_safe, const py::object& batch_p2p, const py::object& cost,
               const py::object& stage_costs, const py::object& comm, const py::object& bytes,
               const py::object& recompute, const py::object& offload,
               const py::object& offload_lead, const py::object& host_bw,
               const py::object& host_latency, const py::object& runtime_arg,
               const py::object& lengths) {
  const std::vector<Runtime> under = runtimes_arg(runtime_arg);
  const int pp_degree = count_arg(pp_arg, "pp_degree", 1, limits::kMaxRanks);
  const int num_microbatches = count_arg(m_arg, "num_microbatches", 1, limits::kMaxMicrobatches);
  const std::optional<int> stages_per_rank =
      optional_count(v_arg, "stages_per_rank", 1, limits::kMaxStagesPerRank);
  const std::optional<int> rank = optional_count(rank_arg, "rank", 0, limits::kMaxRanks - 1);
  // The library reads 0 as "the schedule's default"; here that is None.
  if (stages_per_rank && *stages_per_rank == 0)
    throw ShapeError(limits::excerpt(schedule) +
                     ": stages_per_rank must be positive, got 0; pass 1 or more, or "
                     "None for the schedule's default");
  Problem problem{schedule, pp_degree, num_microbatches, stages_per_rank.value_or(0)};
  problem.forward_only = forward_only;
  const Planner planner(problem);
  const CostModel costs = sim_options(cost, stage_costs, comm, bytes, "rendezvous", nullptr,
                                      host_bw, host_latency, lengths)
                              .costs;
  costs.check_lengths(num_microbatches);
  const LowerOptions options =
      planner.lowering(lowering_choice(lowering, prefetch, serial_safe, comm, batch_p2p), costs);
  const MemoryPolicy policy = memory_policy_arg(recompute, offload, offload_lead);
  if (!under.empty()) {
    // As `pipeplan plan --runtime`: proved under the runtime, lowered
    // serial-safe when the schedule's own lowering is refused there.
    const bool may_retry = lowering.is_none() && !bool_arg(serial_safe, "serial_safe") &&
                           !bool_arg(batch_p2p, "batch_p2p") &&
                           int_in(prefetch, "prefetch", 0, limits::kMaxPrefetch) == 0;
    Release release;
    const Plan order = apply_memory_policy(planner.compute(), policy);
    Plan whole = order;
    if (compute_only) {
      if (std::optional<RuntimeRefusal> r = first_refusal(order, under, options))
        reject_under(*r, "the planned schedule, lowered as its runtime would,");
    } else {
      whole = lower_for_runtimes([&](const LowerOptions& o) { return pipeplan::lower(order, o); },
                                 options, under, may_retry, "the planned schedule")
                  .plan;
    }
    return rank ? keep_rank(std::move(whole), *rank) : whole;
  }
  if (!policy.empty()) {
    // The policy goes into the whole compute order, which is then lowered
    // (as `pipeplan plan --recompute ..`); a rank is kept afterwards.
    Plan whole = apply_memory_policy(planner.compute(), policy);
    Release release;
    if (!compute_only) whole = pipeplan::lower(whole, options);
    return rank ? keep_rank(std::move(whole), *rank) : whole;
  }
  Release release;
  if (rank) return compute_only ? planner.compute_rank(*rank) : planner.plan_rank(*rank, options);
  return compute_only ? planner.compute() : planner.plan(options);
}

// A stage set keyword: None, "all", "0,2-3", or stage numbers.
std::string stage_set_text(const py::object& value, const char* name) {
  if (value.is_none()) return "";
  if (py::isinstance<py::str>(value)) {
    std::string text = value.cast<std::string>();
    if (text.empty())
      throw InputError(std::string(name) + " '': expected 'all' or stages like 0,2,4-7");
    return text;
  }
  if (PyBool_Check(value.ptr()) || !py::isinstance<py::iterable>(value))
    throw TypeFailure{std::string(name) +
                      " must be 'all', stages as text like '0,2-3', or a list of stage numbers, "
                      "got " +
                      type_name(value)};
  std::string text;
  std::size_t i = 0;
  for (const auto& x : value) {
    const std::string where = std::string(name) + "[" + std::to_string(i++) + "]";
    text += (text.empty() ? "" : ",") +
            std::to_string(int_in(x, where.c_str(), 0, limits::kMaxStages - 1));
  }
  if (text.empty())
    throw InputError(std::string(name) + " []: name a stage, or pass None for no " + name);
  return text;
}

std::string first_comm(const Plan& plan) {
  for (const auto& list : plan.ranks)
    for (const Action& a : list)
      if (is_comm(a.type)) return to_string(a);
  return "";
}

std::string plan_name(const Plan& plan) {
  return "the " + limits::excerpt(plan.meta.schedule) + " plan";
}

}  // namespace

MemoryPolicy memory_policy_arg(const py::object& recompute, const py::object& offload,
                               const py::object& offload_lead) {
  std::optional<int> lead;
  if (!offload_lead.is_none())
    lead = static_cast<int>(int_in(offload_lead, "offload_lead", 0, 1 << 30));
  return memory_policy_from(stage_set_text(recompute, "recompute"),
                            stage_set_text(offload, "offload"), lead);
}

LoweringChoice lowering_choice(const py::handle& lowering_arg, const py::handle& prefetch,
                               const py::handle& serial_safe, const py::handle& comm,
                               const py::handle& batch_p2p) {
  LoweringChoice choice;
  if (const std::optional<std::string> lowering = optional_str(lowering_arg, "lowering")) {
    choice.mode = parse_lower_mode(*lowering);
    if (!choice.mode)
      throw InputError("unknown lowering '" + limits::excerpt(*lowering) + "' (expected " +
                       std::string(lower_mode_names()) + ")");
  }
  // 0: no limit; the CLI's --prefetch range.
  choice.max_prefetch = static_cast<int>(int_in(prefetch, "prefetch", 0, limits::kMaxPrefetch));
  choice.serial_safe = bool_arg(serial_safe, "serial_safe");
  choice.batch_p2p = bool_arg(batch_p2p, "batch_p2p");
  choice.transfer_cost_stated = !comm.is_none();
  return choice;
}

namespace {

Plan lower_plan(const Plan& plan, const std::optional<std::string>& send_placement,
                bool reduce_grad, const py::object& lowering, const py::object& prefetch,
                const py::object& serial_safe, const py::object& batch_p2p, const py::object& cost,
                const py::object& stage_costs, const py::object& comm, const py::object& bytes,
                const py::object& recompute, const py::object& offload,
                const py::object& offload_lead, const py::object& host_bw,
                const py::object& host_latency, const py::object& runtime_arg) {
  const std::vector<Runtime> under = runtimes_arg(runtime_arg);
  if (!plan.is_whole())
    throw InputError("lower needs every rank of the plan; " + plan_name(plan) + " holds " +
                     std::to_string(plan.ranks.size()) + " of " +
                     std::to_string(plan.meta.pp_degree) + " ranks");
  if (!plan.is_compute_only())
    throw InputError(plan_name(plan) + " already has communication (" + first_comm(plan) +
                     "); lower takes a compute-only plan, verify() checks this one as written");
  // The memory policy goes into the order first, as `pipeplan lower --recompute ..`.
  const MemoryPolicy policy = memory_policy_arg(recompute, offload, offload_lead);
  std::optional<Plan> with_memory;
  if (!policy.empty()) with_memory = apply_memory_policy(plan, policy);
  const Plan& order = with_memory ? *with_memory : plan;
  LowerOptions options = lower_options(
      order.meta, lowering_choice(lowering, prefetch, serial_safe, comm, batch_p2p),
      sim_options(cost, stage_costs, comm, bytes, "rendezvous", nullptr, host_bw, host_latency)
          .costs);
  if (send_placement) {
    if (*send_placement == "earliest") options.send_placement = SendPlacement::Earliest;
    else if (*send_placement == "parity") options.send_placement = SendPlacement::ParityStaggered;
    else
      throw InputError("unknown send_placement '" + limits::excerpt(*send_placement) +
                       "' (expected earliest or parity)");
  }
  Lowered result;
  {
    Release release;
    result = lower_if_compute_only(order, options);
    if (result.plan && reduce_grad) result.plan = add_reduce_grad(*result.plan);
  }
  // A compute order with defects, or whose ranks wait on each other, is a
  // plan defect.
  if (!result.defects.empty())
    throw PlanFailure{"cannot lower " + plan_name(plan) + ": its compute order has " +
                          std::to_string(result.defects.size()) + " problem(s)\n" +
                          format_diagnostics(result.defects),
                      result.defects};
  if (!under.empty()) {
    // As `pipeplan lower --runtime`.
    const bool may_retry = lowering.is_none() && !bool_arg(serial_safe, "serial_safe") &&
                           !bool_arg(batch_p2p, "batch_p2p") && !send_placement &&
                           int_in(prefetch, "prefetch", 0, limits::kMaxPrefetch) == 0;
    Release release;
    auto lower_with = [&](const LowerOptions& o) {
      Plan p = pipeplan::lower(order, o);
      return reduce_grad ? add_reduce_grad(p) : p;
    };
    if (first_refusal(*result.plan, under))
      return lower_for_runtimes(lower_with, options, under, may_retry, "the lowered plan").plan;
  }
  return std::move(*result.plan);
}

// As `pipeplan verify`: prove() (a whole compute-only plan is checked,
// lowered the way `lower` would and proven; a plan with comms as written).
// `transport` (an abstract model) or `runtime` (a runtime's name), not both.
VerifyOptions proof_target(const py::object& transport, const py::object& runtime) {
  const std::optional<std::string> model = optional_str(transport, "transport");
  const std::optional<std::string> name = optional_str(runtime, "runtime");
  if (model && name)
    throw InputError(
        "give transport or runtime, not both (a runtime names its model: "
        "pipeplan.runtimes() shows which)");
  if (name) return verify_options(runtime_named(*name));
  VerifyOptions o;
  o.transport = transport_from(model.value_or("rendezvous"));
  return o;
}

std::vector<Diagnostic> verify_plan(const Plan& plan, const py::object& transport,
                                    const py::object& runtime) {
  const VerifyOptions target = proof_target(transport, runtime);
  Release release;
  return std::move(prove(plan, std::vector<VerifyOptions>{target}).results.front().diagnostics);
}

Plan read_plan_text(const std::string& text, const std::string& source, const py::object& m_arg,
                    const std::optional<std::string>& mapping,
                    const std::optional<std::string>& schedule, bool forward_only) {
  const std::optional<int> num_microbatches =
      optional_count(m_arg, "num_microbatches", 1, limits::kMaxMicrobatches);
  const CsvReadOptions csv = csv_options(num_microbatches, mapping, schedule, forward_only);
  Plan plan;
  {
    Release release;
    plan = parse_plan(text, source, csv);
  }
  if (detect_format(text) == PlanFormat::Json) {
    // JSON states its metadata; CSV options given with it must agree.
    const PlanMeta& m = plan.meta;
    auto clash = [&](const std::string& option, const std::string& file) {
      throw InputError(option + " contradicts " + source + ", which says " + file);
    };
    if (csv.mapping && *csv.mapping != m.mapping)
      clash("mapping='" + std::string(to_string(*csv.mapping)) + "'",
            "stage_to_rank " + std::string(to_string(m.mapping)));
    if (csv.num_microbatches && *csv.num_microbatches != m.num_microbatches)
      clash("num_microbatches=" + std::to_string(*csv.num_microbatches),
            "num_microbatches " + std::to_string(m.num_microbatches));
    if (schedule && *schedule != m.schedule)
      clash("schedule='" + limits::excerpt(*schedule) + "'",
            "schedule " + limits::excerpt(m.schedule));
    // forward_only states what the plan is for; a JSON plan that does not
    // say so (older or hand-written) is taken at its word, as in the CLI.
    if (forward_only) plan.meta.forward_only = true;
  }
  return plan;
}

}  // namespace

void bind_passes(py::module_& m) {
  py::class_<ScheduleInfo>(m, "ScheduleInfo", "One row of the schedule table (`pipeplan list`).")
      .def_readonly("name", &ScheduleInfo::name, "Canonical name, e.g. '1f1b'.")
      .def_readonly("aliases", &ScheduleInfo::aliases, "Other accepted names.")
      .def_readonly("origin", &ScheduleInfo::origin, "Where the order comes from.")
      .def_readonly("description", &ScheduleInfo::description)
      .def_property_readonly(
          "stage_to_rank", [](const ScheduleInfo& s) { return std::string(to_string(s.mapping)); },
          "Stage placement: 'loop' or 'v'.")
      .def_readonly("default_stages_per_rank", &ScheduleInfo::default_stages_per_rank)
      .def_readonly("allowed_stages_per_rank", &ScheduleInfo::allowed_stages_per_rank,
                    "Allowed v values; empty means any v >= 1.")
      .def_readonly("constraints", &ScheduleInfo::constraints, "Shape constraints, in words.")
      .def("__repr__",
           [](const ScheduleInfo& s) { return "<pipeplan.ScheduleInfo " + s.name + ">"; });
  refuse_uninitialised<ScheduleInfo>();

  m.def(
      "schedules", [] { return schedules(); },
      R"doc(The schedule table in display order, as `pipeplan list -l` shows it:
``[s.name for s in pipeplan.schedules()]`` are the names plan() accepts (it
also accepts each row's aliases, case-insensitively).)doc");

  m.def("plan", &make_plan, py::arg("schedule"), py::arg("pp_degree"), py::arg("num_microbatches"),
        py::arg("stages_per_rank") = py::none(), py::arg("rank") = py::none(),
        py::arg("compute_only") = false, py::arg("forward_only") = false, py::kw_only(),
        py::arg("lowering") = py::none(), py::arg("prefetch") = 0, py::arg("serial_safe") = false,
        py::arg("batch_p2p") = false, py::arg("cost") = py::none(),
        py::arg("stage_costs") = py::none(), py::arg("comm") = py::none(), py::arg("bytes") = 0.0,
        py::arg("recompute") = py::none(), py::arg("offload") = py::none(),
        py::arg("offload_lead") = py::none(), py::arg("host_bw") = py::none(),
        py::arg("host_latency") = py::none(), py::arg("runtime") = py::none(),
        py::arg("lengths") = py::none(),
        R"doc(Plans a schedule: the compute order of every rank, lowered (SEND/RECV
inserted, each rank pair in one FIFO order) unless ``compute_only``.
Equivalent to ``pipeplan plan -s SCHEDULE -p PP -m M [-v V] [-r R] [--compute-only]
[--forward-only] [--lowering ..] [--prefetch N] [--serial-safe] [--batch-p2p] [--cost ..]
[--stage-costs ..] [--comm ..] [--bytes ..] [--recompute ..] [--offload ..]
[--offload-lead K] [--host-bw ..] [--host-latency ..] [--runtime ..] [--lengths ..]``;
the lowering, memory and runtime keywords are lower()'s, ``lengths`` (tokens
of each microbatch) simulate()'s: the lowering times the step for them.

schedule          name or alias from schedules(), e.g. "1f1b", "interleaved-1f1b", "zbv"
pp_degree         number of ranks
num_microbatches  microbatches per step
stages_per_rank   stages per rank (v); None takes the schedule's default
rank              keep only this rank's program (the others are planned to time it)
compute_only      F/B/I/W order only, no SEND/RECV (what torch's _load_csv lowers itself)
forward_only      inference: each rank's forwards in the schedule's order, no backward
                  (recorded in the plan's metadata, so verification owes none)

Raises ShapeError (an InputError) when the schedule cannot run the shape, with
the CLI's message and a fix, and InputError for an unknown schedule or a rank
out of range. Prove the result with verify().

    >>> p = pipeplan.plan("1f1b", 4, 8)
    >>> [str(a) for a in p.ranks[0][:3]]
    ['0F0', '0SEND_F0', '0F1'])doc");

  m.def("lower", &lower_plan, py::arg("plan"), py::arg("send_placement") = py::none(),
        py::arg("reduce_grad") = false, py::kw_only(), py::arg("lowering") = py::none(),
        py::arg("prefetch") = 0, py::arg("serial_safe") = false, py::arg("batch_p2p") = false,
        py::arg("cost") = py::none(), py::arg("stage_costs") = py::none(),
        py::arg("comm") = py::none(), py::arg("bytes") = 0.0, py::arg("recompute") = py::none(),
        py::arg("offload") = py::none(), py::arg("offload_lead") = py::none(),
        py::arg("host_bw") = py::none(), py::arg("host_latency") = py::none(),
        py::arg("runtime") = py::none(),
        R"doc(Inserts SEND/RECV into a whole compute-only plan, as ``pipeplan lower``:
each rank pair's transfers in one common order (deadlock-free under
rendezvous and eager transport). A plan of a known schedule is lowered
exactly as plan() lowers it; with cost keywords, as ``pipeplan lower`` with
the same options.

send_placement  None (the schedule's own), "earliest" or "parity" (odd ranks
                hold a forward output until just before their next compute;
                seed lowering only)
reduce_grad     add <stage>REDUCE_GRAD after each stage's last backward, as
                torch's own lowering does (needed by torch's compute_comms runtime)
lowering        None (the schedule's own: seed for gpipe/1f1b, else
                latency-hiding), "latency-hiding" (receives posted ahead,
                pair order from the cost model, searched where the eager
                bound is missed), "seed" (each RECV right before its
                consumer) or "exact" (latency hiding with an exact search
                over every pair's order, within a work limit; no prefetch
                or serial_safe)
prefetch        latency hiding: most receives a rank posts ahead of their
                consumers (buffers held before use); 0 = no limit
serial_safe     one transfer order per rank across its peers, so the plan
                also runs under the serial model (without cost keywords
                every schedule's default plan already does)
batch_p2p       the batched lowering (Megatron-LM's batch_p2p_comm): each
                RECV right before its consumer, and a send posted together
                with the receive from the same peer it meets as one
                (A;B)BATCH_P2P group; not with lowering="latency-hiding"
                or "exact", nor a prefetch cap
cost, stage_costs, comm, bytes
                the cost model a latency-hiding lowering plans for, as in
                simulate(); without comm (and without a transfer cost from a
                calibrated stage_costs file) it plans for the nominal transfer
                latency of 0.25 forward
recompute       --recompute: None, "all", "0,2-3" or a list of stage numbers; a
                RECOMPUTE right before each backward of those stages (the
                forward keeps only its input)
offload         --offload: the same stage sets; an OFFLOAD right after each
                forward of those stages, a RELOAD offload_lead computes before
                its backward
offload_lead    --offload-lead K (default 1; only with offload)
host_bw, host_latency
                --host-bw, --host-latency: the copy stream the plan is lowered
                for (docs/memory.md)
runtime         --runtime: a runtime's name (pipeplan.runtimes()); the result
                is proved under it and, when no lowering keyword was given,
                lowered serial-safe where the schedule's own lowering is
                refused there; PlanError (naming the runtime and the chain)
                when that is refused too

Raises InputError for a partial plan or one that has comms already (or
memory actions, with a policy), a bad stage list or offload_lead without
offload, and
PlanError (with .diagnostics) when the compute order has defects or its ranks
wait on each other.)doc");

  py::class_<Runtime>(m, "Runtime",
                      "One row of the runtimes table (`pipeplan verify --runtime list`).")
      .def_property_readonly("name", [](const Runtime& r) { return std::string(r.name); })
      .def_property_readonly(
          "aliases",
          [](const Runtime& r) {
            std::vector<std::string> out;
            for (std::string_view a : r.aliases) out.emplace_back(a);
            return out;
          },
          "Other names verify(runtime=..) accepts.")
      .def_property_readonly(
          "model", [](const Runtime& r) { return std::string(to_string(r.model)); },
          "Its transport model: 'rendezvous', 'eager' or 'serial'.")
      .def_property_readonly(
          "waits",
          [](const Runtime& r) {
            return std::string(r.rules.waits == Waits::AtPost ? "at-post" : "before-use");
          },
          "'at-post': each SEND/RECV waited where it stands; 'before-use': a receive "
          "waited before the compute that reads it.")
      .def_property_readonly(
          "groups_apart", [](const Runtime& r) { return r.rules.groups_apart; },
          "Whether BATCH_P2P groups run on a communicator of their own (a group member "
          "never meets a single operation).")
      .def_property_readonly("summary", [](const Runtime& r) { return std::string(r.summary); })
      .def_property_readonly(
          "source", [](const Runtime& r) { return std::string(r.source); },
          "The runtime's source the row was derived from.")
      .def("__repr__",
           [](const Runtime& r) { return "<pipeplan.Runtime " + std::string(r.name) + ">"; });
  refuse_uninitialised<Runtime>();
  m.def(
      "runtimes", [] { return runtimes(); },
      R"doc(The runtimes verify(runtime=..), plan(runtime=..), lower(runtime=..) and
to_torch_csv(runtime=..) accept, in the order ``pipeplan verify --runtime list``
prints them.)doc");
  m.def(
      "transport_models",
      [] {
        std::vector<std::string> out;
        for (const TransportModel& t : kTransportModels) out.emplace_back(t.name);
        return out;
      },
      "The abstract transport models verify(transport=..) accepts, in table order.");

  m.def("verify", &verify_plan, py::arg("plan"), py::arg("transport") = py::none(),
        py::arg("runtime") = py::none(),
        R"doc(Proves the plan: structural checks (counts, ranges, placement, dependencies,
each pair's FIFO) and a run showing every rank reaches the end of its list
under ``transport``: "rendezvous" (NCCL-style in-order pair streams; the
default), "eager" (buffered sends) or "serial" (one stream per rank); or, with
``runtime`` instead, as that runtime runs it (its model and where it waits:
``pipeplan.runtimes()``, ``pipeplan verify --runtime list``). An empty list
means proved. A compute-only plan is checked, lowered as lower() would and proven,
as ``pipeplan verify`` does; a plan with comms is proven as written. A
partial plan (plan(rank=R)) gets a "partial-plan" diagnostic.

    >>> pipeplan.verify(pipeplan.plan("zbv", 4, 8))
    [])doc");

  m.def(
      "check",
      [](const Plan& plan, const py::object& transport, const py::object& runtime) {
        std::vector<Diagnostic> diagnostics = verify_plan(plan, transport, runtime);
        if (!diagnostics.empty()) {
          const std::string model =
              py::str(transport.is_none() ? py::str("rendezvous") : py::str(transport));
          const std::string under = runtime.is_none()
                                        ? model + " transport"
                                        : "runtime " + py::str(runtime).cast<std::string>();
          throw PlanFailure{"FAILED under " + under + ": " + std::to_string(diagnostics.size()) +
                                " problem(s)\n" + format_diagnostics(diagnostics),
                            diagnostics};
        }
      },
      py::arg("plan"), py::arg("transport") = py::none(), py::arg("runtime") = py::none(),
      R"doc(verify() for tests: raises PlanError (message as ``pipeplan verify`` prints
it, ``.diagnostics`` the list) unless the plan is proved.

    >>> pipeplan.check(pipeplan.from_torch(schedule.pipeline_order_with_comms)))doc");

  m.def("loads", &read_plan_text, py::arg("text"), py::arg("source") = "<string>",
        py::arg("num_microbatches") = py::none(), py::arg("mapping") = py::none(),
        py::arg("schedule") = py::none(), py::arg("forward_only") = false,
        R"doc(Parses a plan: JSON (schemas/plan.schema.json) or torch's CSV, told apart by
content (JSON starts with '{'). A CSV carries no metadata: ``num_microbatches``,
``mapping`` ("loop" or "v") and ``schedule`` supply it, else it is inferred as
torch's _load_csv does; given with JSON they must agree with the file.
``forward_only=True`` marks an inference plan (F/SEND_F/RECV_F only), as the
CLI's --forward-only does.
Raises InputError "<source>:<line>:<column>: ..." on malformed input. The
plan is returned as read; verify() judges it.)doc");

  m.def(
      "read",
      [](const py::object& path, const py::object& num_microbatches,
         const std::optional<std::string>& mapping, const std::optional<std::string>& schedule,
         bool forward_only) {
        const std::string p = path_from(path);
        std::string text;
        {
          Release release;
          text = frontend::read_file(p);
        }
        return read_plan_text(text, p, num_microbatches, mapping, schedule, forward_only);
      },
      py::arg("path"), py::arg("num_microbatches") = py::none(), py::arg("mapping") = py::none(),
      py::arg("schedule") = py::none(), py::arg("forward_only") = false,
      R"doc(loads() of a file (JSON or CSV, detected from content); errors name the path.)doc");
}

}  // namespace pipeplan::python
