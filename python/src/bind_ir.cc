// Plan, Action, PlanMeta and Diagnostic: the IR as Python sees it. A Plan
// wraps the C++ plan; Python objects per action are made only on request.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <limits>
#include <sstream>

#include "common.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan::python {
namespace {

py::object optional_int(int v) { return v < 0 ? py::none() : py::object(py::int_(v)); }

std::string plan_repr(const Plan& p) {
  std::ostringstream s;
  s << "<pipeplan.Plan " << p.meta.schedule << " pp=" << p.meta.pp_degree
    << " m=" << p.meta.num_microbatches << " v=" << p.meta.stages_per_rank << ", "
    << p.num_actions() << " actions, " << (p.is_compute_only() ? "compute-only" : "with comms");
  if (p.meta.forward_only) s << ", forward-only";
  if (!p.is_whole()) {
    s << ", rank" << (p.rank_ids.size() == 1 ? " " : "s ");
    for (std::size_t i = 0; i < p.rank_ids.size(); ++i) s << (i ? "," : "") << p.rank_ids[i];
    s << " only";
  }
  s << ">";
  return s.str();
}

// One rank's actions as a read-only sequence over the Plan it came from:
// Action objects are made on access, so plan.ranks costs memory by the ranks,
// not by the actions (25M Actions as Python objects took 4.3 GB).
struct ActionList {
  py::object owner;  // the Plan, kept alive
  std::size_t entry = 0;
  const std::vector<Action>& actions() const { return owner.cast<const Plan&>().ranks[entry]; }
};

py::list list_of(const std::vector<Action>& actions) {
  py::list out;
  for (const Action& a : actions) out.append(py::cast(a));
  return out;
}

// Element-wise against any sequence of Actions or action strings.
bool same_actions(const std::vector<Action>& mine, const py::handle& other) {
  if (py::isinstance<ActionList>(other)) return mine == other.cast<const ActionList&>().actions();
  if (!py::isinstance<py::sequence>(other) || py::isinstance<py::str>(other)) return false;
  const auto seq = py::reinterpret_borrow<py::sequence>(other);
  if (seq.size() != mine.size()) return false;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const py::object x = seq[i];
    if (py::isinstance<Action>(x)    ? !(x.cast<const Action&>() == mine[i])
        : py::isinstance<py::str>(x) ? x.cast<std::string>() != to_string(mine[i])
                                     : true)
      return false;
  }
  return true;
}

ActionList rank_list(const py::object& plan, std::size_t entry) { return {plan, entry}; }

// (text,): what __getstate__ gives; anything else is a tampered pickle.
std::string state_text(const py::object& state, const char* type) {
  if (!py::isinstance<py::tuple>(state) || py::len(state) != 1 ||
      !py::isinstance<py::str>(py::reinterpret_borrow<py::tuple>(state)[0]))
    throw TypeFailure{std::string(type) + ".__setstate__ expects (str,), got " +
                      limits::excerpt(py::repr(state).cast<std::string>())};
  return py::reinterpret_borrow<py::tuple>(state)[0].cast<std::string>();
}

// Keys of the JSON document's metadata, which Plan.meta also answers to.
py::object meta_item(const PlanMeta& m, const std::string& key) {
  if (key == "schedule") return py::str(m.schedule);
  if (key == "pp_degree") return py::int_(m.pp_degree);
  if (key == "num_microbatches") return py::int_(m.num_microbatches);
  if (key == "stages_per_rank") return py::int_(m.stages_per_rank);
  if (key == "num_stages") return py::int_(m.num_stages());
  if (key == "stage_to_rank") return py::str(std::string(to_string(m.mapping)));
  if (key == "forward_only") return py::bool_(m.forward_only);
  throw py::key_error(key);
}
const char* const kMetaKeys[] = {"schedule",        "pp_degree",  "num_microbatches",
                                 "stages_per_rank", "num_stages", "stage_to_rank",
                                 "forward_only"};

// The one action parser; a refusal says where and why, as the readers do.
Action action_from_text(const std::string& text) {
  ActionParse parsed = parse_action_located(text);
  if (!parsed.action && text.find("BATCH_P2P") != std::string::npos)
    throw InputError("'" + text +
                     "' is a batched P2P group, several actions: read it in a plan (loads, "
                     "from_torch); its members are Actions with batch_next");
  if (!parsed.action) throw InputError(describe_bad_action(text, parsed));
  return *parsed.action;
}

}  // namespace

void bind_ir(py::module_& m) {
  py::class_<Action>(m, "Action", R"doc(
One action of a rank's program, in torch.distributed.pipelining's grammar:
``str(action)`` is e.g. ``"2F0"``, ``"1SEND_F3"``, ``"(0F7;7B3)OVERLAP_F_B"``,
and pipeplan's memory actions ``"0OFFLOAD3"``, ``"0RELOAD3"``, ``"0RECOMPUTE3"``.

``Action("1SEND_F3")`` parses the torch grammar as the plan readers do
(strictly: ``"2BW0"`` is an InputError saying why). Actions compare equal to each other and to their string. A
batched P2P group ``(0SEND_F1;0RECV_B0)BATCH_P2P`` is one cell of a plan but
several Actions, each a SEND/RECV; all but the last have ``batch_next``. A group
of one, ``Action("(0SEND_F0)BATCH_P2P")``, is one Action with ``waited``: committed
alone and waited where it stands.)doc")
      .def(py::init([](const py::object& text) {
             if (!py::isinstance<py::str>(text))
               throw TypeFailure{"Action() takes an action string, got " + type_name(text)};
             return action_from_text(text.cast<std::string>());
           }),
           py::arg("text"))
      .def_property_readonly(
          "type", [](const Action& a) { return std::string(to_string(a.type)); },
          "The action type as torch spells it: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
          "OVERLAP_F_B, UNSHARD, RESHARD, REDUCE_GRAD; or a memory action: OFFLOAD, RELOAD, "
          "RECOMPUTE.")
      .def_property_readonly(
          "stage", [](const Action& a) { return a.stage; },
          "The stage (for OVERLAP_F_B: the forward's stage).")
      .def_property_readonly(
          "microbatch", [](const Action& a) { return optional_int(a.microbatch); },
          "The microbatch; None for UNSHARD / RESHARD / REDUCE_GRAD.")
      .def_property_readonly(
          "sub_stage",
          [](const Action& a) {
            return a.type == ActionType::OverlapFB ? optional_int(a.sub_stage) : py::none();
          },
          "OVERLAP_F_B only: the backward's stage; None otherwise.")
      .def_property_readonly(
          "sub_microbatch",
          [](const Action& a) {
            return a.type == ActionType::OverlapFB ? optional_int(a.sub_microbatch) : py::none();
          },
          "OVERLAP_F_B only: the backward's microbatch; None otherwise.")
      .def_property_readonly(
          "is_compute", [](const Action& a) { return is_compute(a.type); },
          "F, B, I, W, OVERLAP_F_B or RECOMPUTE (what runs on the compute stream).")
      .def_property_readonly(
          "is_memory", [](const Action& a) { return is_memory(a.type); },
          "OFFLOAD, RELOAD or RECOMPUTE.")
      .def_property_readonly(
          "is_comm", [](const Action& a) { return is_comm(a.type); }, "SEND_* or RECV_*.")
      .def_property_readonly(
          "batch_next", [](const Action& a) { return a.batch_next; },
          "True for a member of a batched P2P group, (A;B;...)BATCH_P2P, that is posted "
          "together with the next action of its rank (every member but the last); the group's "
          "members are consecutive Actions of plan.ranks[r].")
      .def_property_readonly(
          "waited", [](const Action& a) { return a.waited; },
          "True for a SEND/RECV written as a BATCH_P2P group of one, (A)BATCH_P2P: committed "
          "alone and waited where it stands (DualPipe's commit-and-wait, Megatron's "
          "one-operation calls); str() gives the group.")
      .def("__str__", [](const Action& a) { return to_string(a); })
      .def("__repr__", [](const Action& a) { return "Action('" + to_string(a) + "')"; })
      .def(
          "__eq__", [](const Action& a, const Action& b) { return a == b; }, py::is_operator())
      .def(
          "__eq__", [](const Action& a, const std::string& s) { return to_string(a) == s; },
          py::is_operator())
      .def("__hash__", [](const Action& a) { return py::hash(py::str(to_string(a))); })
      .def(py::pickle(
          [](const Action& a) -> py::object {
            if (a.batch_next) return py::make_tuple(to_string(a), true);
            return py::make_tuple(to_string(a));
          },
          [](const py::object& state) {
            // (text,) or, for a BATCH_P2P member posted with the next action, (text, True)
            bool batched = false;
            py::object text = state;
            if (py::isinstance<py::tuple>(state) && py::len(state) == 2 &&
                py::isinstance<py::bool_>(py::reinterpret_borrow<py::tuple>(state)[1])) {
              batched = py::reinterpret_borrow<py::tuple>(state)[1].cast<bool>();
              text = py::make_tuple(py::reinterpret_borrow<py::tuple>(state)[0]);
            }
            Action a = action_from_text(state_text(text, "Action"));
            a.batch_next = batched;
            return a;
          }));
  refuse_uninitialised<Action>();

  py::class_<ActionList>(m, "ActionList", R"doc(
One rank's actions (``plan.ranks[r]``, ``plan.rank(r)``): a read-only
sequence of Action made on access. It indexes, slices (a list), iterates,
has a length and compares equal to any sequence of the same Actions or
action strings; ``list(actions)`` copies it.)doc")
      .def("__len__", [](const ActionList& l) { return l.actions().size(); })
      .def("__getitem__",
           [](const ActionList& l, const py::object& index) -> py::object {
             const auto& actions = l.actions();
             if (py::isinstance<py::slice>(index)) {
               std::size_t from = 0, to = 0, step = 0, count = 0;
               if (!py::reinterpret_borrow<py::slice>(index).compute(actions.size(), &from, &to,
                                                                     &step, &count))
                 throw py::error_already_set();
               py::list out;
               for (std::size_t k = 0, i = from; k < count; ++k, i += step)
                 out.append(py::cast(actions[i]));
               return std::move(out);
             }
             long long i = int_in(index, "index", std::numeric_limits<long long>::min(),
                                  std::numeric_limits<long long>::max());
             const auto n = static_cast<long long>(actions.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("action index out of range");
             return py::cast(actions[static_cast<std::size_t>(i)]);
           })
      .def(
          "__iter__",
          [](const ActionList& l) {
            const auto& actions = l.actions();
            return py::make_iterator<py::return_value_policy::copy>(actions.begin(), actions.end());
          },
          py::keep_alive<0, 1>())
      .def("__contains__",
           [](const ActionList& l, const py::object& x) {
             for (const Action& a : l.actions())
               if (py::isinstance<Action>(x)    ? a == x.cast<const Action&>()
                   : py::isinstance<py::str>(x) ? to_string(a) == x.cast<std::string>()
                                                : false)
                 return true;
             return false;
           })
      .def("__eq__",
           [](const ActionList& l, const py::object& o) { return same_actions(l.actions(), o); })
      .def("__ne__",
           [](const ActionList& l, const py::object& o) { return !same_actions(l.actions(), o); })
      .def("__repr__",
           [](const ActionList& l) { return py::repr(list_of(l.actions())).cast<std::string>(); })
      .attr("__hash__") = py::none();
  refuse_uninitialised<ActionList>();

  py::class_<PlanMeta>(m, "PlanMeta", R"doc(
A plan's shape and placement. Attributes and keys (``meta["pp_degree"]``)
follow the JSON format: schedule, pp_degree, num_microbatches,
stages_per_rank, num_stages, stage_to_rank ("loop" or "v"), forward_only.)doc")
      .def_readonly("schedule", &PlanMeta::schedule, "Schedule name, or 'custom'.")
      .def_readonly("pp_degree", &PlanMeta::pp_degree, "Number of ranks.")
      .def_readonly("num_microbatches", &PlanMeta::num_microbatches, "Microbatches per step.")
      .def_readonly("stages_per_rank", &PlanMeta::stages_per_rank, "Stages per rank (v).")
      .def_property_readonly("num_stages", &PlanMeta::num_stages, "pp_degree * stages_per_rank.")
      .def_property_readonly(
          "stage_to_rank", [](const PlanMeta& m) { return std::string(to_string(m.mapping)); },
          "Stage placement: 'loop' (stage s on rank s % pp) or 'v' (V-shaped).")
      .def_readonly("forward_only", &PlanMeta::forward_only,
                    "True for an inference plan (F/SEND_F/RECV_F only; no backward owed).")
      .def(
          "rank_of",
          [](const PlanMeta& m, const py::object& stage) {
            return m.rank_of(static_cast<int>(int_in(stage, "stage", 0, m.num_stages() - 1)));
          },
          py::arg("stage"), "The rank that owns `stage` (0..num_stages-1).")
      .def(
          "stages_of",
          [](const PlanMeta& m, const py::object& rank) {
            return m.stages_of(static_cast<int>(int_in(rank, "rank", 0, m.pp_degree - 1)));
          },
          py::arg("rank"), "The stages of `rank` (0..pp_degree-1), ascending.")
      .def("__getitem__", &meta_item, py::arg("key"))
      .def("keys",
           [](const PlanMeta&) {
             py::list keys;
             for (const char* k : kMetaKeys) keys.append(k);
             return keys;
           })
      .def(
          "to_dict",
          [](const PlanMeta& m) {
            py::dict d;
            for (const char* k : kMetaKeys) d[k] = meta_item(m, k);
            return d;
          },
          "The metadata as a dict (the JSON format's keys).")
      .def(py::self == py::self)
      .def("__repr__", [](const PlanMeta& m) {
        std::ostringstream s;
        s << "PlanMeta(schedule='" << m.schedule << "', pp_degree=" << m.pp_degree
          << ", num_microbatches=" << m.num_microbatches
          << ", stages_per_rank=" << m.stages_per_rank << ", stage_to_rank='"
          << to_string(m.mapping) << "'" << (m.forward_only ? ", forward_only=True" : "") << ")";
        return s.str();
      });
  refuse_uninitialised<PlanMeta>();

  py::class_<Diagnostic>(m, "Diagnostic", R"doc(
One defect found by verify(): a stable ``code`` (e.g. "fifo-both-send"), the
``rank`` and ``index`` of the action (None when about the whole plan), the
``action`` in torch grammar (None when none) and a concrete ``message``.
``str(d)`` is the line `pipeplan verify` prints.)doc")
      .def_readonly("code", &Diagnostic::code)
      .def_property_readonly("rank", [](const Diagnostic& d) { return optional_int(d.rank); })
      .def_property_readonly("index", [](const Diagnostic& d) { return optional_int(d.index); })
      .def_property_readonly("action",
                             [](const Diagnostic& d) {
                               return d.action.empty() ? py::none() : py::object(py::str(d.action));
                             })
      .def_readonly("message", &Diagnostic::message)
      .def(
          "to_dict",
          [](const Diagnostic& d) {
            py::dict out;
            out["code"] = d.code;
            out["rank"] = optional_int(d.rank);
            out["index"] = optional_int(d.index);
            out["action"] = d.action.empty() ? py::none() : py::object(py::str(d.action));
            out["message"] = d.message;
            return out;
          },
          "The diagnostic as `pipeplan verify -f json` writes it.")
      .def(py::self == py::self)
      .def("__str__", [](const Diagnostic& d) { return format_diagnostics({d}); })
      .def("__repr__", [](const Diagnostic& d) {
        return "Diagnostic(code=" + py::repr(py::str(d.code)).cast<std::string>() +
               ", rank=" + py::repr(optional_int(d.rank)).cast<std::string>() +
               ", index=" + py::repr(optional_int(d.index)).cast<std::string>() +
               ", action=" + py::repr(py::str(d.action)).cast<std::string>() +
               ", message=" + py::repr(py::str(d.message)).cast<std::string>() + ")";
      });
  refuse_uninitialised<Diagnostic>();

  py::class_<Plan>(m, "Plan", R"doc(
A plan: metadata and one ordered action list per rank. It holds the C++
plan; ``ranks`` builds Python objects only when asked.

- ``plan.meta``: the PlanMeta (``plan.meta.pp_degree``, ``plan.meta["schedule"]``)
- ``plan.ranks``: per rank, a list of Action (``str(a)`` is torch grammar)
- ``plan.to_json()``, ``plan.to_csv()``, ``plan.to_text()``, ``plan.timeline()``
- ``len(plan)``: the number of actions; plans compare with ``==``
Make one with plan(), lower(), loads(), read() or from_torch().)doc")
      .def_property_readonly(
          "meta", [](const Plan& p) { return p.meta; }, "Shape and placement (PlanMeta).")
      .def_property_readonly(
          "ranks",
          [](const py::object& self) {
            const Plan& p = self.cast<const Plan&>();
            py::list out(p.ranks.size());
            for (std::size_t r = 0; r < p.ranks.size(); ++r) out[r] = py::cast(rank_list(self, r));
            return out;
          },
          "Per rank (in rank_ids order), its Actions as an ActionList: a read-only sequence "
          "that makes each Action when it is read (list(plan.ranks[r]) copies one).")
      .def_property_readonly(
          "rank_ids", [](const Plan& p) { return p.rank_ids; },
          "The rank each entry of `ranks` belongs to: 0..pp-1, or one rank for plan(rank=R).")
      .def(
          "rank",
          [](const py::object& self, const py::object& rank_arg) {
            const Plan& p = self.cast<const Plan&>();
            const long long rank = int_in(rank_arg, "rank", std::numeric_limits<long long>::min(),
                                          std::numeric_limits<long long>::max());
            for (std::size_t i = 0; i < p.rank_ids.size(); ++i)
              if (p.rank_ids[i] == rank) return rank_list(self, i);
            throw py::index_error("the plan holds no rank " + std::to_string(rank));
          },
          py::arg("rank"), "The Actions of one rank (by rank id), as an ActionList.")
      .def_property_readonly("num_actions", &Plan::num_actions, "Actions over all ranks.")
      .def_property_readonly("compute_only", &Plan::is_compute_only,
                             "True when the plan holds no SEND/RECV.")
      .def_property_readonly("has_memory_actions", &Plan::has_memory_actions,
                             "True when some rank holds an OFFLOAD, RELOAD or RECOMPUTE.")
      .def_property_readonly("is_whole", &Plan::is_whole,
                             "True when every rank 0..pp-1 is present, in order.")
      .def(
          "to_json",
          [](const Plan& p) {
            std::ostringstream s;
            write_json(p, s);
            return s.str();
          },
          "The JSON document `pipeplan plan -f json` writes (schemas/plan.schema.json).")
      .def(
          "to_csv",
          [](const Plan& p) {
            std::ostringstream s;
            write_csv(p, s);
            return s.str();
          },
          "torch's _dump_csv layout: one row per rank, one action per cell (whole plans only; "
          "for torch's _load_csv see to_torch_csv()).")
      .def(
          "to_text",
          [](const Plan& p) {
            std::ostringstream s;
            write_text(p, s);
            return s.str();
          },
          "One line per rank, 'rank R: a b c' (`pipeplan plan -f text`).")
      .def(
          "timeline",
          [](const Plan& p) {
            std::ostringstream s;
            write_timeline(p, s);
            return s.str();
          },
          "The ASCII timeline `pipeplan show` draws (unit costs).")
      .def("__len__", &Plan::num_actions)
      .def("__repr__", &plan_repr)
      .def(py::self == py::self)
      .def("__copy__", [](const Plan& p) { return p; })
      .def(
          "__deepcopy__", [](const Plan& p, const py::dict&) { return p; }, py::arg("memo"))
      .def(py::pickle(
          [](const Plan& p) -> py::object {
            std::ostringstream s;
            write_json(p, s);
            return py::make_tuple(s.str());
          },
          [](const py::object& state) {
            return parse_json_plan(state_text(state, "Plan"), "<pickle>");
          }));
  refuse_uninitialised<Plan>();
}

}  // namespace pipeplan::python
