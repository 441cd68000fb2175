"""pipeplan: plan, verify and simulate pipeline-parallel schedules in process.

A thin layer over pipeplan's C++ library: the same planners, lowering,
verifier and simulator as the ``pipeplan`` CLI, with the CLI's messages.

    >>> import pipeplan
    >>> plan = pipeplan.plan("interleaved-1f1b", pp_degree=4, num_microbatches=8)
    >>> pipeplan.verify(plan)                      # [] = deadlock-free
    []
    >>> pipeplan.simulate(plan, cost="F=1,B=2").makespan
    >>> pipeplan.verify(pipeplan.from_torch(schedule.pipeline_order_with_comms))
    >>> pipeplan.verify(pipeplan.from_deepspeed(TrainSchedule, 8, 4), transport="serial")

Functions: plan, lower, verify, check, simulate, compare, search, plan_step, loads, read,
read_layers, from_torch, from_deepspeed, to_torch_csv, schedules. Types: Plan, PlanMeta,
Action, ActionList, Diagnostic, SimResult, RankStats, Comparison, ComparisonRow,
ScheduleInfo, Layer, LayerProfile, SearchResult, LibraryRun, StepPlan.
Errors (pipeplan.errors): Error > InputError > ShapeError, BudgetError, InputTypeError
(also a TypeError); Error > PlanError; Error > InternalError.
"""

from __future__ import annotations

import collections.abc as _abc

from . import errors
from .errors import (
    BudgetError,
    Error,
    InputError,
    InputTypeError,
    InternalError,
    PlanError,
    ShapeError,
)
from ._pipeplan import (
    Action,
    ActionList,
    Comparison,
    ComparisonRow,
    Diagnostic,
    Layer,
    LayerProfile,
    LibraryRun,
    Plan,
    PlanMeta,
    RankStats,
    Runtime,
    ScheduleInfo,
    SearchResult,
    SimResult,
    StepPlan,
    __version__,
    check,
    compare,
    from_torch,
    loads,
    lower,
    plan,
    plan_step,
    read,
    read_layers,
    runtimes,
    schedules,
    search,
    simulate,
    to_torch_csv,
    transport_models,
    verify,
)
from .deepspeed import from_deepspeed

__all__ = [
    "Action",
    "ActionList",
    "Comparison",
    "ComparisonRow",
    "Diagnostic",
    "BudgetError",
    "Error",
    "InputError",
    "InputTypeError",
    "InternalError",
    "Layer",
    "LayerProfile",
    "LibraryRun",
    "Plan",
    "PlanError",
    "PlanMeta",
    "RankStats",
    "Runtime",
    "ScheduleInfo",
    "SearchResult",
    "ShapeError",
    "SimResult",
    "StepPlan",
    "__version__",
    "check",
    "compare",
    "errors",
    "from_deepspeed",
    "from_torch",
    "loads",
    "lower",
    "plan",
    "plan_step",
    "read",
    "read_layers",
    "runtimes",
    "schedules",
    "search",
    "simulate",
    "to_torch_csv",
    "transport_models",
    "verify",
]

# plan.ranks[r] is a read-only sequence of Actions, made on access.
_abc.Sequence.register(ActionList)

# Show the public names as pipeplan.X (not pipeplan._pipeplan.X) in help().
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", None) == "pipeplan._pipeplan":
        try:
            _obj.__module__ = "pipeplan"
        except (AttributeError, TypeError):
            pass
del _name, _obj
