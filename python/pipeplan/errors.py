"""pipeplan's exceptions.

Every error pipeplan raises on purpose is a ``pipeplan.Error``; the class
tells bad input from a plan that cannot run, as the CLI's exit codes do:

- ``InputError`` (exit code 2): malformed file or order, unknown schedule or
  option, a shape the schedule cannot run (``ShapeError``), a memory budget
  no searched plan fits (``BudgetError``), an argument of the wrong type
  (``InputTypeError``, also a TypeError). Also a ValueError.
- ``PlanError`` (exit code 1): the plan is invalid or cannot run to
  completion; ``.diagnostics`` lists the problems.
- ``InternalError`` (exit code 3): a pipeplan bug; please report it.

The messages are the CLI's.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every error pipeplan raises on purpose."""

    exit_code = 3


class InputError(Error, ValueError):
    """Bad input: malformed plan or order, unknown name, bad option (CLI exit 2)."""

    exit_code = 2


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (``plan("1f1b", True, 8)``: a bool is not
    an int). A ``TypeError``, and an ``InputError`` like all bad input."""


class ShapeError(InputError):
    """A shape the schedule cannot run, e.g. 1f1b with fewer microbatches than ranks."""


class BudgetError(InputError):
    """No plan ``search()`` built fits the memory budget.

    ``smallest_budget`` is the least per-rank peak memory among the plans it
    built: passing it as ``memory_limit`` works.
    """

    def __init__(self, message: str, smallest_budget: float = float("nan")):
        super().__init__(message)
        self.smallest_budget = smallest_budget


class PlanError(Error):
    """A plan that is invalid or cannot run to completion (CLI exit 1).

    ``diagnostics`` holds the problems (``pipeplan.Diagnostic``), when known.
    """

    exit_code = 1

    def __init__(self, message: str, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


class InternalError(Error, RuntimeError):
    """A broken internal invariant: a pipeplan bug (CLI exit 3)."""

    exit_code = 3


__all__ = [
    "Error",
    "InputError",
    "InputTypeError",
    "ShapeError",
    "BudgetError",
    "PlanError",
    "InternalError",
]
