"""DeepSpeed's pipeline schedules as pipeplan plans: ``from_deepspeed``.

DeepSpeed's ``PipelineEngine`` (deepspeed/runtime/pipe/engine.py,
``_exec_schedule``) runs each stage's ``PipeSchedule.steps()``: a list of
``PipeInstruction`` per step, executed one after another in list order. The
instructions name *buffers*, not microbatches; this module replays what the
engine does with the buffers to recover which microbatch each instruction
touches, so the microbatch ids come from the instruction stream itself:

- ``LoadMicroBatch(b)``: the engine's ``_next_batch()``; the k-th load of a
  stage is microbatch k (first stage: ``inputs[b]``; last stage: ``labels[b]``).
- ``ForwardPass(b)``: ``outputs[b] = forward(inputs[b])`` (the last stage's loss
  reads ``labels[b]``).
- ``SendActivation(b)`` / ``RecvActivation(b)``: ``p2p.send(outputs[b])`` to the
  next stage / ``inputs[b] = p2p.recv()`` from the previous one.
- ``RecvGrad(b)``: ``grad_layer = p2p.recv()`` from the next stage: one shared
  gradient buffer, whatever ``b`` says.
- ``BackwardPass(b)``: backward of ``outputs[b]`` with ``grad_layer``; clears
  ``outputs[b]``.
- ``SendGrad(b)``: ``p2p.send(inputs[b].grad)``; clears ``inputs[b]``.
- ``ReduceTiedGrads``, ``ReduceGrads``, ``OptimizerStep``: no pipeline transfer
  (collectives after the last step), not part of the plan.

``p2p.send``/``p2p.recv`` (deepspeed/runtime/pipe/p2p.py) are
``dist.send``/``dist.recv`` with ``async_op=False`` asserted and no tag: matched
by order per direction, each completing before the engine runs the next
instruction. That is pipeplan's ``serial`` transport (docs/semantics.md).

Nothing here imports DeepSpeed: instructions are recognised by class name and
read through ``buffer_id`` (or ``kwargs["buffer_id"]``), so duck-typed
schedules work too.
"""

from __future__ import annotations

import collections

from ._pipeplan import Plan, from_torch
from .errors import InputError

#: The transport DeepSpeed's pipeline engine is (docs/semantics.md).
TRANSPORT = "serial"

_SEND_ACT, _RECV_ACT = "SendActivation", "RecvActivation"
_SEND_GRAD, _RECV_GRAD = "SendGrad", "RecvGrad"
_BUFFER_OPS = ("LoadMicroBatch", "ForwardPass", "BackwardPass", _SEND_ACT, _RECV_ACT,
               _SEND_GRAD, _RECV_GRAD)
_NO_TRANSFER = ("ReduceTiedGrads", "ReduceGrads", "OptimizerStep")


class _Instr:
    """One instruction of one stage: its name, buffer and where it stands."""

    __slots__ = ("name", "buffer", "step", "pos")

    def __init__(self, name, buffer, step, pos):
        self.name, self.buffer, self.step, self.pos = name, buffer, step, pos

    def where(self, stage):
        b = "" if self.buffer is None else "buffer_id=%d" % self.buffer
        return "stage %d step %d instruction %d (%s(%s))" % (stage, self.step, self.pos,
                                                              self.name, b)


def _buffer_of(cmd, name, stage, step, pos):
    buf = getattr(cmd, "buffer_id", None)
    if buf is None:
        buf = (getattr(cmd, "kwargs", None) or {}).get("buffer_id")
    if isinstance(buf, bool) or not isinstance(buf, int) or buf < 0:
        raise InputError("from_deepspeed: stage %d step %d instruction %d (%s) has no "
                         "non-negative integer buffer_id (got %r)" % (stage, step, pos, name, buf))
    return buf


def _read_stream(sched, stage):
    """The stage's instructions in the engine's order: steps in order, each in list order."""
    steps = getattr(sched, "steps", None)
    if not callable(steps):
        raise InputError("from_deepspeed: stage %d: %r is not a DeepSpeed schedule (no steps())"
                         % (stage, type(sched).__name__))
    out = []
    try:
        step_iter = iter(steps())
    except TypeError:
        raise InputError("from_deepspeed: stage %d: steps() did not return an iterable" % stage)
    for step, cmds in enumerate(step_iter):
        try:
            cmds = list(cmds)
        except TypeError:
            raise InputError("from_deepspeed: stage %d step %d is not a list of instructions"
                             % (stage, step))
        for pos, cmd in enumerate(cmds):
            name = type(cmd).__name__
            if name in _BUFFER_OPS:
                out.append(_Instr(name, _buffer_of(cmd, name, stage, step, pos), step, pos))
            elif name in _NO_TRANSFER:
                continue
            elif name == "CommitP2P" or getattr(cmd, "phase", None) is not None:
                raise InputError(
                    "from_deepspeed: stage %d step %d instruction %d (%s): the queued, "
                    "batched P2P of DualPipeVSchedule is not read; from_deepspeed reads the "
                    "PipelineEngine's blocking instructions (TrainSchedule, InferenceSchedule)"
                    % (stage, step, pos, name))
            else:
                raise InputError(
                    "from_deepspeed: stage %d step %d instruction %d: unknown instruction %s "
                    "(DeepSpeed's PipelineEngine runs %s)"
                    % (stage, step, pos, name, ", ".join(_BUFFER_OPS + _NO_TRANSFER)))
    return out


def _stage_schedules(schedules, micro_batches, stages):
    """One schedule object per stage, in stage order."""
    if isinstance(schedules, type) or (callable(schedules) and not hasattr(schedules, "steps")
                                        and not hasattr(schedules, "__iter__")):
        if micro_batches is None or stages is None:
            raise InputError("from_deepspeed: a schedule class needs micro_batches and stages")
        for key, v in (("micro_batches", micro_batches), ("stages", stages)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError("from_deepspeed: %s must be a positive int (got %r)" % (key, v))
        return [schedules(micro_batches=micro_batches, stages=stages, stage_id=s)
                for s in range(stages)]
    if micro_batches is not None or stages is not None:
        raise InputError("from_deepspeed: micro_batches and stages go with a schedule class, "
                         "not with schedule objects (they carry their own)")
    if hasattr(schedules, "steps"):
        schedules = [schedules]
    try:
        scheds = list(schedules)
    except TypeError:
        raise InputError("from_deepspeed: expected one DeepSpeed schedule per stage or a "
                         "schedule class, got %s" % type(schedules).__name__)
    if not scheds:
        raise InputError("from_deepspeed: no schedules (one per pipeline stage)")
    for k, s in enumerate(scheds):
        sid = getattr(s, "stage_id", k)
        if sid != k:
            raise InputError("from_deepspeed: schedule %d is for stage_id %r; give one schedule "
                             "per stage, in stage order 0..%d" % (k, sid, len(scheds) - 1))
        n = getattr(s, "stages", len(scheds))
        if n != len(scheds):
            raise InputError("from_deepspeed: stage %d's schedule has stages=%r, but %d schedules "
                             "were given" % (k, n, len(scheds)))
    return scheds


class _Mb:
    """A microbatch id, or (a received value not sent yet) the message it will be."""

    __slots__ = ("ref",)

    def __init__(self, ref=None):
        self.ref = ref

    def get(self):
        v = self
        while isinstance(v, _Mb):
            v = v.ref
        return v


class _Stage:
    """The engine's buffers of one stage, holding microbatch ids (None: empty)."""

    def __init__(self, stage, num_stages, stream, num_buffers):
        self.stage, self.stream = stage, stream
        self.first, self.last = stage == 0, stage == num_stages - 1
        self.num_buffers = num_buffers
        self.inputs, self.outputs, self.labels = {}, {}, {}
        self.loads = 0
        self.actions = []  # (kind, _Mb)
        self.losses = []  # (instruction, inputs' _Mb, labels' _Mb) of the last stage


class _Link:
    """One direction between two stages: sends and receives matched by order."""

    def __init__(self):
        self.sent = collections.deque()  # values posted, not received yet
        self.waiting = collections.deque()  # receives posted, not sent yet: (_Mb, stage, instr)

    def send(self, value):
        if self.waiting:
            self.waiting.popleft()[0].ref = value
        else:
            self.sent.append(value)

    def recv(self, stage, ins):
        if self.sent:
            return _Mb(self.sent.popleft())
        cell = _Mb()
        self.waiting.append((cell, stage, ins))
        return cell


def _fail(stage, ins, what):
    raise InputError("from_deepspeed: %s %s" % (ins.where(stage), what))


def _run(st, links, p):
    """Runs one stage's instructions with the engine's buffer semantics."""
    s = st.stage
    for ins in st.stream:
        b, name = ins.buffer, ins.name
        if st.num_buffers is not None and b >= st.num_buffers:
            _fail(s, ins, "names a buffer beyond num_pipe_buffers() = %d" % st.num_buffers)
        if name == "LoadMicroBatch":
            if st.first:
                st.inputs[b] = _Mb(st.loads)
            if st.last:
                st.labels[b] = _Mb(st.loads)
            st.loads += 1
        elif name == "ForwardPass":
            mb = st.inputs.get(b)
            if mb is None:
                _fail(s, ins, "runs a forward on an empty input buffer (nothing was loaded or "
                      "received into it)")
            if st.last:
                st.losses.append((ins, mb, st.labels.get(b)))
            st.outputs[b] = mb
            st.actions.append(("F", mb))
        elif name == "BackwardPass":
            mb = st.outputs.get(b)
            if mb is None:
                _fail(s, ins, "runs a backward on an empty output buffer")
            st.outputs[b] = None
            st.actions.append(("B", mb))
        elif name in (_SEND_ACT, _SEND_GRAD):
            fwd = name == _SEND_ACT
            peer = s + 1 if fwd else s - 1
            if not 0 <= peer < p:
                _fail(s, ins, "sends to stage %d, which does not exist" % peer)
            mb = (st.outputs if fwd else st.inputs).get(b)
            if mb is None:
                _fail(s, ins, "sends from an empty %s buffer" % ("output" if fwd else "input"))
            if not fwd:
                st.inputs[b] = None
            links[(s, peer)].send(mb)
            st.actions.append(("SEND_F" if fwd else "SEND_B", mb))
        elif name in (_RECV_ACT, _RECV_GRAD):
            fwd = name == _RECV_ACT
            peer = s - 1 if fwd else s + 1
            if not 0 <= peer < p:
                _fail(s, ins, "receives from stage %d, which does not exist" % peer)
            mb = links[(peer, s)].recv(s, ins)
            if fwd:
                st.inputs[b] = mb
            # A RecvGrad fills the engine's one grad_layer, which the next
            # BackwardPass uses whatever its buffer: the plan's B needs the
            # RECV_B of its own microbatch before it, so a gradient received
            # late, or not at all, is the verifier's backward-before-grad.
            st.actions.append(("RECV_F" if fwd else "RECV_B", mb))


def _trace(stages):
    """Runs the engine's buffer semantics over all stages; fills each stage's actions.

    Transfers match by order per direction (the k-th send of stage s to s+1 is
    the k-th receive there), so what a receive gets does not depend on timing:
    the stages run one after the other, and a receive whose message is not
    sent yet holds a reference the send fills in.
    """
    links = collections.defaultdict(_Link)
    p = len(stages)
    for st in stages:
        _run(st, links, p)
    for (src, dst), link in sorted(links.items()):
        if link.waiting:
            _, stage, ins = link.waiting[0]
            raise InputError(
                "from_deepspeed: %s receives a message stage %d never sends (%d receives "
                "from stage %d have no send)" % (ins.where(stage), src, len(link.waiting), src))
    last = stages[-1]
    for ins, mb, label in last.losses:
        if label is None or label.get() != mb.get():
            _fail(last.stage, ins, "computes the loss of microbatch %d with the labels of %s"
                  % (mb.get(), "no microbatch" if label is None else
                     "microbatch %d" % label.get()))
    for st in stages:
        st.actions = ["%d%s%d" % (st.stage, kind, mb.get()) for kind, mb in st.actions]


def from_deepspeed(schedules, micro_batches=None, stages=None, *, forward_only=None) -> Plan:
    """A pipeplan plan of DeepSpeed's pipeline schedule, one rank per stage.

    ``schedules``: one DeepSpeed ``PipeSchedule`` per stage in stage order
    (``[TrainSchedule(m, p, s) for s in range(p)]``), or a schedule class with
    ``micro_batches`` and ``stages``. Duck-typed objects with ``steps()``
    yielding lists of instructions named as DeepSpeed's work too. Each
    stage's instructions are replayed as the PipelineEngine executes them,
    following the buffers to find each one's microbatch (module docstring);
    the plan's actions keep the engine's order. ``forward_only`` defaults to
    "no BackwardPass anywhere" (InferenceSchedule). Verify the plan under
    ``pipeplan.deepspeed.TRANSPORT`` (``"serial"``). Bad input:
    ``InputError``.
    """
    scheds = _stage_schedules(schedules, micro_batches, stages)
    p = len(scheds)
    states = []
    for s, sched in enumerate(scheds):
        n = getattr(sched, "num_pipe_buffers", None)
        n = n() if callable(n) else None
        states.append(_Stage(s, p, _read_stream(sched, s), n if isinstance(n, int) else None))
    _trace(states)
    m = states[0].loads
    if m == 0:
        raise InputError("from_deepspeed: stage 0 loads no microbatch (no LoadMicroBatch)")
    if forward_only is None:
        forward_only = not any(i.name == "BackwardPass" for st in states for i in st.stream)
    return from_torch({st.stage: st.actions for st in states}, num_microbatches=m,
                      mapping="loop", schedule="custom", forward_only=bool(forward_only))
