"""pipeplan.from_deepspeed without DeepSpeed: duck-typed instruction streams
(objects named as DeepSpeed's instructions) and bad input. The real package is
the oracle in python/oracle_tests/test_deepspeed.py."""

import pytest

import pipeplan


def duck(name, buffer_id=None):
    cls = type(name, (), {})
    obj = cls()
    if buffer_id is not None:
        obj.buffer_id = buffer_id
    return obj


class DuckSchedule:
    def __init__(self, steps):
        self._steps = steps

    def steps(self):
        return iter(self._steps)


def test_duck_typed_streams():
    # p=2, m=1 by hand, no DeepSpeed class involved.
    s0 = DuckSchedule([[duck("LoadMicroBatch", 0), duck("ForwardPass", 0)],
                       [duck("RecvGrad", 0), duck("SendActivation", 0)],
                       [duck("BackwardPass", 0)], [duck("OptimizerStep")]])
    s1 = DuckSchedule([[], [duck("RecvActivation", 0), duck("LoadMicroBatch", 0),
                            duck("ForwardPass", 0)],
                       [duck("BackwardPass", 0)], [duck("SendGrad", 0)]])
    plan = pipeplan.from_deepspeed([s0, s1])
    assert plan.to_text().splitlines() == ["rank 0: 0F0 0RECV_B0 0SEND_F0 0B0",
                                           "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0"]
    # RecvGrad before SendActivation, on both sides of a blocking pair: the
    # verifier, not the converter, says it hangs.
    assert [d.code for d in pipeplan.verify(plan, transport="serial")][-1] == "deadlock"


@pytest.mark.parametrize("bad,match", [
    (42, "expected one DeepSpeed schedule per stage"),
    ([], "no schedules"),
    ([object()], "not a DeepSpeed schedule"),
    ([DuckSchedule([[duck("Frobnicate")]])], "unknown instruction Frobnicate"),
    ([DuckSchedule([[duck("ForwardPass")]])], "no non-negative integer buffer_id"),
    ([DuckSchedule([[duck("ForwardPass", 0)]])], "forward on an empty input buffer"),
    ([DuckSchedule([[duck("LoadMicroBatch", 0), duck("ForwardPass", 0),
                     duck("SendActivation", 0)]])], "sends to stage 1, which does not exist"),
])
def test_bad_input(bad, match):
    with pytest.raises(pipeplan.InputError, match=match):
        pipeplan.from_deepspeed(bad)


class Instr:
    """As DeepSpeed's PipeInstruction: the buffer only in kwargs here."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


def named(name, **kwargs):
    return type(name, (Instr,), {})(**kwargs)


class OneStage:
    """A schedule class called as DeepSpeed's: (micro_batches, stages, stage_id)."""

    def __init__(self, micro_batches, stages, stage_id):
        self.micro_batches, self.stages, self.stage_id = micro_batches, stages, stage_id

    def num_pipe_buffers(self):
        return 1

    def steps(self):
        for _ in range(self.micro_batches):
            yield [named("LoadMicroBatch", buffer_id=0), named("ForwardPass", buffer_id=0),
                   named("BackwardPass", buffer_id=0)]
        yield [named("ReduceGrads"), named("OptimizerStep")]


def test_a_class_and_kwargs_buffers():
    plan = pipeplan.from_deepspeed(OneStage, 3, 1)
    assert plan.to_text().splitlines() == ["rank 0: 0F0 0B0 0F1 0B1 0F2 0B2"]
    assert pipeplan.verify(plan, transport=pipeplan.deepspeed.TRANSPORT) == []
    assert pipeplan.deepspeed.TRANSPORT == "serial"


def test_forward_only_follows_the_stream():
    s = DuckSchedule([[duck("LoadMicroBatch", 0), duck("ForwardPass", 0)]])
    assert pipeplan.from_deepspeed([s]).meta.forward_only
    assert not pipeplan.from_deepspeed([s], forward_only=False).meta.forward_only


def test_more_bad_input():
    class TwoBuffers(DuckSchedule):
        def num_pipe_buffers(self):
            return 2
    with pytest.raises(pipeplan.InputError, match="beyond num_pipe_buffers"):
        pipeplan.from_deepspeed([TwoBuffers([[duck("LoadMicroBatch", 2)]])])
    s0 = DuckSchedule([[duck("LoadMicroBatch", 0), duck("ForwardPass", 0)]])
    s1 = DuckSchedule([[duck("RecvActivation", 0), duck("ForwardPass", 0)]])
    with pytest.raises(pipeplan.InputError, match="stage 1 step 0 instruction 0 "
                                                  r"\(RecvActivation\(buffer_id=0\)\) receives a "
                                                  "message stage 0 never sends"):
        pipeplan.from_deepspeed([s0, s1])
    with pytest.raises(pipeplan.InputError, match="micro_batches must be a positive int"):
        pipeplan.from_deepspeed(OneStage, 0, 1)
    with pytest.raises(pipeplan.InputError, match="loads no microbatch"):
        pipeplan.from_deepspeed([DuckSchedule([[]])])
