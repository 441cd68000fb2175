"""from_torch on torch 2.15.0's real schedule objects (issue 35, part 2).

Every schedule class torch.distributed.pipelining exports is constructed on
real PipelineStages in one process over torch's 'fake' process group
(torch.testing._internal.distributed.fake_pg.FakeStore, world size p, rank 0:
nothing is sent) without running; its `pipeline_order` holds every rank's
order. pipeplan.from_torch(schedule.pipeline_order) must equal pipeplan's
planner of the same name and shape over a grid, and verify clean; the
runtime classes' `pipeline_order_with_comms` (torch's own lowering, with its
WAIT_SEND_*) must verify too.

Two differences are pinned, so a change in torch shows here:
- ScheduleGPipe runs backward in microbatch order 0..m-1 (schedules.py,
  ScheduleGPipe._step_microbatches and _get_pipeline_order); pipeplan's gpipe
  keeps its seed's reverse order m-1..0. Same forwards, same backwards.
- Schedule1F1B._get_pipeline_order (a description only: step() does not use
  it) numbers the last rank's forwards 1..m instead of 0..m-1 when that rank
  has no warm-up forward (forward_mb starts at 0 and is incremented before
  use); pipeplan's verify refuses that order, and the other ranks match.
"""

import pytest

from oracles import require, version_of

import pipeplan

GRID = [(2, 2), (2, 3), (2, 4), (2, 8), (4, 4), (4, 6), (4, 8), (4, 12)]


def classes():
    pp = require("torch.distributed.pipelining")
    return {"gpipe": (pp.ScheduleGPipe, 1, "loop"), "1f1b": (pp.Schedule1F1B, 1, "loop"),
            "interleaved-1f1b": (pp.ScheduleInterleaved1F1B, 2, "loop"),
            "looped-bfs": (pp.ScheduleLoopedBFS, 2, "loop"),
            "interleaved-zb": (pp.ScheduleInterleavedZeroBubble, 2, "loop"),
            "zbv": (pp.ScheduleZBVZeroBubble, 2, "v"),
            "dualpipev": (pp.ScheduleDualPipeV, 2, "v")}


def build(cls, p, m, v, style):
    """The schedule object rank 0 builds (its pipeline_order covers every rank)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=p)
    try:
        n = p * v
        mine = [0] if v == 1 else ([0, n - 1] if style == "v" else [0, p])
        stages = [PipelineStage(torch.nn.Linear(4, 4), s, n, torch.device("cpu")) for s in mine]
        loss = torch.nn.MSELoss()
        return cls(stages[0], m, loss_fn=loss) if v == 1 else cls(stages, m, loss_fn=loss)
    finally:
        dist.destroy_process_group()


def rows(plan):
    return [r for r in plan.to_csv().splitlines()]


def test_from_torch_equals_pipeplans_planners_on_real_schedule_objects():
    checked, bad = 0, []
    for name, (cls, v, style) in classes().items():
        for p, m in GRID:
            try:
                sched = build(cls, p, m, v, style)
            except Exception as e:  # torch's own shape rules (DualPipeV: m >= 2p, 1F1B: m >= p)
                try:
                    pipeplan.plan(name, p, m, stages_per_rank=v, compute_only=True)
                except pipeplan.InputError:
                    continue  # both refuse
                if name == "dualpipev" and m < 2 * p:
                    continue  # torch 2.15 needs m >= stages (2p); pipeplan plans fewer
                bad.append("%s p%d m%d: torch refuses (%s), pipeplan plans it" % (name, p, m, e))
                continue
            order = {r: [a for a in acts if a is None or "REDUCE_GRAD" not in str(a)]
                     for r, acts in sched.pipeline_order.items()}
            want = rows(pipeplan.plan(name, p, m, stages_per_rank=v, compute_only=True))
            if name == "1f1b" and m > p - 1:
                last = [str(a) for a in order[p - 1] if a is not None]
                assert last[0] == "%dF1" % (p - 1), "torch's 1F1B order defect fixed? %s" % last
                got = pipeplan.from_torch(order, num_microbatches=m + 1, schedule=name)
                assert any(d.code for d in pipeplan.verify(got)), "verify accepts a shifted order"
                order[p - 1] = [a for a in order[p - 1]]
                fixed = []
                for a in order[p - 1]:
                    s = str(a) if a is not None else None
                    if s and "F" in s and "B" not in s:
                        r, mb = s.split("F")
                        s = "%sF%d" % (r, int(mb) - 1)
                    fixed.append(s)
                order[p - 1] = fixed
            got = pipeplan.from_torch(order, num_microbatches=m, schedule=name)
            if name == "gpipe":
                want = [",".join([c for c in r.split(",") if "F" in c] +
                                 sorted([c for c in r.split(",") if "B" in c],
                                        key=lambda c: int(c.split("B")[1]))) for r in want]
            if rows(got) != want:
                bad.append("%s p%d m%d:\n torch    %s\n pipeplan %s" % (
                    name, p, m, rows(got), want))
            diags = pipeplan.verify(got)
            if diags:
                bad.append("%s p%d m%d: verify: %s" % (name, p, m, diags[0]))
            with_comms = getattr(sched, "pipeline_order_with_comms", None)
            if with_comms:
                lowered = pipeplan.from_torch(with_comms, num_microbatches=m, schedule=name)
                diags = pipeplan.verify(lowered)
                if diags:
                    bad.append("%s p%d m%d with comms: verify: %s" % (name, p, m, diags[0]))
            checked += 1
    assert checked >= 40, checked
    assert not bad, "torch %s:\n%s" % (version_of("torch"), "\n".join(bad))
