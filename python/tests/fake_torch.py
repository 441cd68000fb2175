"""Stand-ins for torch.distributed.pipelining's schedule objects.

torch is not a test dependency; these mimic what pipeplan.from_torch sees:
`_Action` named tuples whose str() is the torch grammar, and a schedule whose
`pipeline_order` / `pipeline_order_with_comms` map rank -> list of actions,
None for an idle step (as torch 2.11's schedules.py builds them).
"""

import enum
import re
from typing import NamedTuple, Optional


class _ComputationType(enum.Enum):
    FORWARD = 1
    BACKWARD_INPUT = 2
    BACKWARD_WEIGHT = 3
    UNSHARD = 4
    RESHARD = 5
    SEND_F = 6
    RECV_F = 7
    SEND_B = 8
    RECV_B = 9
    FULL_BACKWARD = 10
    OVERLAP_F_B = 11
    REDUCE_GRAD = 12

    def __str__(self):
        return _STR[self]

    @staticmethod
    def from_str(text):
        return {v: k for k, v in _STR.items()}[text]


_STR = {
    _ComputationType.FORWARD: "F",
    _ComputationType.BACKWARD_INPUT: "I",
    _ComputationType.BACKWARD_WEIGHT: "W",
    _ComputationType.UNSHARD: "UNSHARD",
    _ComputationType.RESHARD: "RESHARD",
    _ComputationType.SEND_F: "SEND_F",
    _ComputationType.RECV_F: "RECV_F",
    _ComputationType.SEND_B: "SEND_B",
    _ComputationType.RECV_B: "RECV_B",
    _ComputationType.FULL_BACKWARD: "B",
    _ComputationType.OVERLAP_F_B: "OVERLAP_F_B",
    _ComputationType.REDUCE_GRAD: "REDUCE_GRAD",
}

_ACTION = re.compile(r"(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)")


class _Action(NamedTuple):
    stage_index: int
    computation_type: _ComputationType
    microbatch_index: Optional[int] = None
    sub_actions: Optional[tuple] = None

    def __repr__(self):
        if self.sub_actions is not None:
            return "(%s)%s" % (";".join(str(a) for a in self.sub_actions), self.computation_type)
        text = str(self.stage_index) + str(self.computation_type)
        if self.microbatch_index is not None:
            text += str(self.microbatch_index)
        return text

    @staticmethod
    def from_str(text):
        text = text.strip()
        if text.startswith("("):
            inner, kind = text[1:].split(")")
            subs = tuple(_Action.from_str(s) for s in inner.split(";"))
            return _Action(subs[0].stage_index, _ComputationType.from_str(kind), None, subs)
        m = _ACTION.fullmatch(text)
        assert m, text
        mb = int(m.group(3)) if m.group(3) else None
        return _Action(int(m.group(1)), _ComputationType.from_str(m.group(2)), mb)


class FakeSchedule:
    """A schedule object holding torch-style orders read from a torch CSV dump."""

    def __init__(self, compute_csv, comms_csv=None, n_microbatches=None):
        self.pipeline_order = self._order(compute_csv)
        self.pipeline_order_with_comms = self._order(comms_csv) if comms_csv else None
        self._n_microbatches = n_microbatches

    @staticmethod
    def _order(text):
        order = {}
        for rank, line in enumerate(l for l in text.splitlines() if l.strip()):
            order[rank] = [_Action.from_str(c) if c.strip() else None for c in line.split(",")]
        return order
