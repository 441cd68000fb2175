"""DeepSpeed's real pipeline schedules as the oracle of pipeplan.from_deepspeed.

DeepSpeed's TrainSchedule and InferenceSchedule (deepspeed/runtime/pipe/
schedule.py) are run for every stage of a grid of shapes; their instruction
streams are converted (microbatches traced through the engine's buffers),
verified under the transport DeepSpeed's engine is (serial: blocking
dist.send/recv, deepspeed/runtime/pipe/p2p.py), and their compute orders
compared with pipeplan's own planners. The golden file the C++ runtimes test
reads (tests/golden/deepspeed/) is checked against the package here, so that
test stands on DeepSpeed's real streams, not on a restatement of them.
"""

import os
import pathlib

import pytest

import pipeplan
from oracles import SOURCE_DIR, require, version_of

schedule = require("deepspeed.runtime.pipe.schedule")
TrainSchedule, InferenceSchedule = schedule.TrainSchedule, schedule.InferenceSchedule

STAGES = range(1, 9)
MICROBATCHES = range(1, 17)
GRID = [(p, m) for p in STAGES for m in MICROBATCHES]
GOLDEN = pathlib.Path(SOURCE_DIR) / "tests" / "golden" / "deepspeed"


def compute_order(plan):
    return [[str(a) for a in rank if a.is_compute] for rank in plan.ranks]


def lines(plan):
    return [[str(a) for a in rank] for rank in plan.ranks]


def test_the_transport_is_serial():
    # p2p.send/recv assert async_op == False and call dist.send/dist.recv with
    # no tag: each transfer completes before the engine's next instruction.
    assert pipeplan.deepspeed.TRANSPORT == "serial"
    assert version_of("deepspeed")


@pytest.mark.parametrize("cls", [TrainSchedule, InferenceSchedule])
def test_objects_and_class_give_one_plan(cls):
    for p, m in [(1, 3), (3, 5), (4, 2)]:
        objects = [cls(micro_batches=m, stages=p, stage_id=s) for s in range(p)]
        assert pipeplan.from_deepspeed(objects) == pipeplan.from_deepspeed(cls, m, p)


def test_train_grid_verifies_and_is_1f1b():
    for p, m in GRID:
        plan = pipeplan.from_deepspeed(TrainSchedule, m, p)
        where = "deepspeed %s TrainSchedule p=%d m=%d" % (version_of("deepspeed"), p, m)
        assert plan.meta.pp_degree == p and plan.meta.num_microbatches == m, where
        assert not plan.meta.forward_only, where
        assert pipeplan.verify(plan, transport="serial") == [], where
        # serial accepts least: the other two models accept it as well.
        assert pipeplan.verify(plan, transport="rendezvous") == [], where
        assert pipeplan.verify(plan, transport="eager") == [], where
        got = compute_order(plan)
        if m >= p:
            # pipeplan's 1f1b accepts m >= p: there the orders are equal.
            assert got == lines(pipeplan.plan("1f1b", p, m, compute_only=True)), where
        else:
            # pipeplan's 1f1b refuses m < p; DeepSpeed runs 1F1B's form with
            # the warmup cut to m: stage s forwards w = min(p-s, m) microbatches,
            # then alternates backward/forward, then drains (for m >= p that
            # is 1f1b's w = p-s). Forwards and backwards in microbatch order.
            # gpipe (backwards in reverse order) is equal only for m == 1.
            with pytest.raises(pipeplan.ShapeError):
                pipeplan.plan("1f1b", p, m)
            gpipe = lines(pipeplan.plan("gpipe", p, m, compute_only=True))
            assert (got == gpipe) == (m == 1), where
        for s, order in enumerate(got):
            w = min(p - s, m)
            assert [a[len(str(s))] for a in order] == list("F" * w + "BF" * (m - w) + "B" * w), where
            assert [a for a in order if "F" in a] == ["%dF%d" % (s, k) for k in range(m)], where
            assert [a for a in order if "B" in a] == ["%dB%d" % (s, k) for k in range(m)], where


def test_inference_grid_verifies_and_is_gpipe():
    for p, m in GRID:
        plan = pipeplan.from_deepspeed(InferenceSchedule, m, p)
        where = "deepspeed %s InferenceSchedule p=%d m=%d" % (version_of("deepspeed"), p, m)
        assert plan.meta.forward_only, where
        for model in ("serial", "rendezvous", "eager"):
            assert pipeplan.verify(plan, transport=model) == [], (where, model)
        gpipe = pipeplan.plan("gpipe", p, m, compute_only=True, forward_only=True)
        assert compute_order(plan) == lines(gpipe), where


def test_comms_differ_from_pipeplans_lowering_past_two_stages():
    # The compute orders are equal; where the transfers sit is not. DeepSpeed
    # exchanges at the start of a step what the previous step produced: a
    # forward's SEND_F waits for the next (backward) step, after its RECV_B,
    # and a backward's SEND_B for the next forward step; in inference odd
    # stages receive the next activation before sending the last one.
    # pipeplan's 1f1b (parity-staggered sends) and gpipe lowerings send
    # right after the producer where they can: the same plan only for p <= 2
    # (and, in inference, m=1).
    for p, m in GRID:
        train = pipeplan.from_deepspeed(TrainSchedule, m, p)
        if m >= p:
            assert (lines(train) == lines(pipeplan.plan("1f1b", p, m))) == (p <= 2), (p, m)
        infer = pipeplan.from_deepspeed(InferenceSchedule, m, p)
        gpipe = pipeplan.plan("gpipe", p, m, forward_only=True)
        assert (lines(infer) == lines(gpipe)) == (p <= 2 or m == 1), (p, m)


def test_comms_keep_deepspeeds_order_within_a_step():
    # p=3, m=4, stage 1: a forward step exchanges SendGrad (previous backward)
    # then RecvActivation; a backward step RecvGrad then SendActivation
    # (previous forward); then the compute.
    plan = pipeplan.from_deepspeed(TrainSchedule, 4, 3)
    assert plan.to_text().splitlines()[1] == (
        "rank 1: 1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1RECV_B0 1SEND_F1 1B0 1SEND_B0 1RECV_F2 "
        "1F2 1RECV_B1 1SEND_F2 1B1 1SEND_B1 1RECV_F3 1F3 1RECV_B2 1SEND_F3 1B2 1SEND_B2 "
        "1RECV_B3 1B3 1SEND_B3")
    infer = pipeplan.from_deepspeed(InferenceSchedule, 4, 3)
    # Odd stages receive before they send, even stages send first.
    assert infer.to_text().splitlines()[1] == (
        "rank 1: 1RECV_F0 1F0 1RECV_F1 1SEND_F0 1F1 1RECV_F2 1SEND_F1 1F2 1RECV_F3 1SEND_F2 "
        "1F3 1SEND_F3")


def golden_text(cls):
    out = []
    for p in range(2, 7):
        for m in range(1, 11):
            out.append("p=%d m=%d\n%s\n" % (p, m, pipeplan.from_deepspeed(cls, m, p).to_text()))
    return "".join(out)


@pytest.mark.parametrize("cls,name", [(TrainSchedule, "train"), (InferenceSchedule, "inference")])
def test_the_runtimes_golden_is_deepspeeds(cls, name):
    # tests/runtimes_test.cc verifies these plans under every model without
    # Python; they must be what the real package's streams are.
    # PIPEPLAN_REGEN_GOLDEN=1 rewrites them.
    path = GOLDEN / ("%s.txt" % name)
    text = golden_text(cls)
    if os.environ.get("PIPEPLAN_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, "%s differs from deepspeed %s: PIPEPLAN_REGEN_GOLDEN=1" % (
        path, version_of("deepspeed"))


# Mutants -------------------------------------------------------------------


class Mutated:
    """A schedule whose steps() are the real one's, edited by `edit(stream)`."""

    def __init__(self, real, edit):
        self.real, self.edit = real, edit
        self.stage_id, self.stages = real.stage_id, real.stages

    def num_pipe_buffers(self):
        return self.real.num_pipe_buffers()

    def steps(self):
        steps = [list(cmds) for cmds in self.real.steps()]
        self.edit(steps)
        return steps


def mutate(cls, m, p, stage, edit):
    return [Mutated(cls(micro_batches=m, stages=p, stage_id=s), edit) if s == stage
            else cls(micro_batches=m, stages=p, stage_id=s) for s in range(p)]


def drop_nth(name, n):
    def edit(steps):
        seen = 0
        for cmds in steps:
            for i, cmd in enumerate(cmds):
                if type(cmd).__name__ == name:
                    if seen == n:
                        del cmds[i]
                        return
                    seen += 1
        raise AssertionError("no %s number %d" % (name, n))
    return edit


def swap_plan_sends(plan, rank):
    """The plan with rank's first two SEND_Fs swapped (each still after its F)."""
    order = lines(plan)
    idx = [i for i, a in enumerate(order[rank]) if "SEND_F" in a][:2]
    i, j = idx
    moved = order[rank].pop(i)
    order[rank].insert(j, moved)
    return pipeplan.from_torch(dict(enumerate(order)), num_microbatches=plan.meta.num_microbatches,
                               forward_only=plan.meta.forward_only)


@pytest.mark.parametrize("p,m", [(2, 2), (3, 4), (4, 8), (8, 16)])
@pytest.mark.parametrize("cls", [TrainSchedule, InferenceSchedule])
def test_swapped_sends_are_rejected(cls, p, m):
    # Rank 0 posts SEND_F1 before SEND_F0: rank 1's first RECV_F meets the
    # wrong microbatch (fifo-corruption). With p=2 in training, rank 0 posts
    # RECV_B0 between its first two sends, so moving SEND_F0 past it leaves
    # both ranks receiving first on the pair (fifo-both-recv).
    plan = swap_plan_sends(pipeplan.from_deepspeed(cls, m, p), 0)
    diags = pipeplan.verify(plan, transport="serial")
    want = "fifo-both-recv" if (cls is TrainSchedule and p == 2) else "fifo-corruption"
    assert diags and diags[0].code == want, (cls.__name__, p, m, diags)
    assert diags[0].rank in (0, 1)


@pytest.mark.parametrize("p,m", [(2, 2), (3, 4), (4, 8), (8, 16)])
def test_swapped_send_instructions_pair_wrong_labels(p, m):
    # In the stream itself: stage 0's first two SendActivations trade buffers,
    # so the next stage receives microbatch 1 first. It runs it, and the last
    # stage computes a loss with another microbatch's labels: no transfer
    # hangs, the data is wrong, and the converter says so.
    def edit(steps):
        sends = [c for cmds in steps for c in cmds if type(c).__name__ == "SendActivation"]
        sends[0].buffer_id, sends[1].buffer_id = sends[1].buffer_id, sends[0].buffer_id
        sends[0].kwargs, sends[1].kwargs = sends[1].kwargs, sends[0].kwargs
    with pytest.raises(pipeplan.InputError, match="with the labels of microbatch|empty output"):
        pipeplan.from_deepspeed(mutate(TrainSchedule, m, p, 0, edit))


@pytest.mark.parametrize("p,m", [(2, 2), (3, 4), (4, 8), (8, 16)])
def test_dropped_recv_grad_is_rejected(p, m):
    for stage in range(p - 1):
        for n in (0, m - 1):
            plan = pipeplan.from_deepspeed(mutate(TrainSchedule, m, p, stage, drop_nth("RecvGrad", n)))
            diags = pipeplan.verify(plan, transport="serial")
            codes = [d.code for d in diags]
            where = (p, m, stage, n, codes)
            # Matching is by order: the receives after the dropped one get the
            # gradient of the microbatch before theirs, so the next stage's last
            # SEND_B has no receive, and the backward of microbatch n (and every
            # later one) runs before the RECV_B of its gradient.
            assert codes[0] == "unmatched-send", where
            assert (diags[0].rank, diags[0].action) == (stage + 1, "%dSEND_B%d" % (stage + 1, m - 1))
            late = ["%dB%d" % (stage, k) for k in range(n, m)]
            assert [d.action for d in diags if d.code == "backward-before-grad"] == late, where


# Bad input (the duck-typed and generic cases: python/tests/test_from_deepspeed.py)


def test_bad_input_deepspeed():
    with pytest.raises(pipeplan.InputError, match="needs micro_batches and stages"):
        pipeplan.from_deepspeed(TrainSchedule)
    with pytest.raises(pipeplan.InputError, match="in stage order"):
        pipeplan.from_deepspeed([TrainSchedule(4, 2, 1), TrainSchedule(4, 2, 0)])
    with pytest.raises(pipeplan.InputError, match="stages=3, but 2 schedules"):
        pipeplan.from_deepspeed([TrainSchedule(4, 3, 0), TrainSchedule(4, 3, 1)])
    with pytest.raises(pipeplan.InputError, match="go with a schedule class"):
        pipeplan.from_deepspeed([TrainSchedule(4, 1, 0)], 4, 1)
    # DualPipeV queues its P2P and commits it in batches; not the
    # PipelineEngine's blocking instructions.
    if hasattr(schedule, "DualPipeVSchedule"):
        with pytest.raises(pipeplan.InputError, match="DualPipeVSchedule"):
            pipeplan.from_deepspeed(schedule.DualPipeVSchedule, 4, 2)
    # The receives outnumber the sends: what the extra one gets is unknown.
    with pytest.raises(pipeplan.InputError, match="never sends"):
        pipeplan.from_deepspeed(mutate(TrainSchedule, 4, 2, 0, drop_nth("SendActivation", 3)))
