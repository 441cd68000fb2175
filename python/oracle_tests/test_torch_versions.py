"""`--torch-version` / `to_torch_csv(torch_version=)` judged by the installed torch
(2.15.0, scripts/oracles.txt): issue 35, item 7.

pipeplan's table of torch runtimes (include/pipeplan/torch_runtime.h, docs/interop.md
"torch versions") was read from torch/distributed/pipelining/schedules.py of each
release's wheel. Here the installed torch's own code is the judge:

- the tokens the CSV for the installed release holds are exactly the ones its
  `_ComputationType` has (WAIT_SEND_F/B, WAIT_REDUCE_GRAD, REDUCE_GRAD, OVERLAP_F_B),
  and its `_Action.from_str` reads every cell;
- a `--torch-version <installed>` compute_comms CSV loads into the real
  `_PipelineScheduleRuntime` with `_load_csv(format="compute_comms")` (which runs
  `_prepare_schedule_with_comms` and `_validate_send_waits`) over torch's fake
  process group (rank 0, no process sends), and the order it holds is the file's;
- a CSV written for torch 2.11 (no waits) is refused by the installed runtime:
  the version matters;
- the installed `_batch_p2p` posts an all-send batch as plain isend (rendezvous),
  and `_PipelineScheduleRuntime` never calls `_check_torch_compile_compatibility`
  (the compile-guard warning's claim).
"""

import csv
import inspect
import io

import pytest

from oracles import require, run_cli, version_of

import pipeplan


def installed():
    """The installed torch as pipeplan spells a release ("2.15")."""
    major, minor = version_of("torch").split(".")[:2]
    return "%s.%s" % (major, minor)


def load_compute_comms(text, p, m, v, style="loop"):
    """rank 0's `_PipelineScheduleRuntime` with `text` loaded as compute_comms."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import tempfile
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=p)
    try:
        n = p * v
        mine = [0] if v == 1 else ([0, n - 1] if style == "v" else [0, p])
        stages = [PipelineStage(torch.nn.Linear(4, 4), s, n, torch.device("cpu")) for s in mine]
        sched = _PipelineScheduleRuntime(stages, m, loss_fn=torch.nn.MSELoss())
        with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as f:
            f.write(text)
        sched._load_csv(f.name, format="compute_comms")
        return sched
    finally:
        dist.destroy_process_group()


def cells(text):
    return [[c for c in row] for row in csv.reader(io.StringIO(text, newline=""))]


def test_the_csv_for_the_installed_torch_holds_its_tokens():
    schedules = require("torch.distributed.pipelining.schedules")
    names = {t.name for t in schedules._ComputationType}
    plan = pipeplan.plan("interleaved-1f1b", 2, 4, stages_per_rank=2)
    text = pipeplan.to_torch_csv(plan, torch_version=version_of("torch"))
    for token in ("WAIT_SEND_F", "WAIT_SEND_B", "WAIT_REDUCE_GRAD", "REDUCE_GRAD"):
        assert (token in text) == (token in names), (token, version_of("torch"))
    for row in cells(text):
        for cell in row:
            assert schedules._Action.from_str(cell) is not None, cell
    overlap = pipeplan.to_torch_csv(pipeplan.plan("dualpipev", 2, 4), torch_version=installed())
    assert ("OVERLAP_F_B" in names) == ("OVERLAP_F_B" in overlap)


@pytest.mark.parametrize("schedule,p,m,v", [("1f1b", 2, 4, 1), ("interleaved-1f1b", 2, 4, 2),
                                            ("interleaved-1f1b", 4, 8, 2)])
def test_the_installed_runtime_loads_the_cli_csv_for_its_release(tmp_path, schedule, p, m, v):
    require("torch.distributed.pipelining")
    compute = tmp_path / "c.csv"
    compute.write_text(run_cli("plan", "-s", schedule, "-p", p, "-m", m, "-v", v,
                               "--compute-only", "-f", "csv").stdout)
    text = run_cli("lower", compute, "-s", schedule, "--reduce-grad", "-f", "torch-csv",
                   "--torch-version", installed()).stdout
    sched = load_compute_comms(text, p, m, v)
    for rank, row in enumerate(cells(text)):
        assert [str(a) for a in sched.pipeline_order_with_comms[rank]] == row, rank
    # Written for torch 2.11 (no WAIT_* cells), the same plan is refused by the
    # installed runtime, which retires sends only at their waits.
    if "WAIT_SEND_F" in {t.name for t in require(
            "torch.distributed.pipelining.schedules")._ComputationType}:
        old = run_cli("lower", compute, "-s", schedule, "--reduce-grad", "-f", "torch-csv",
                      "--torch-version", "2.11").stdout
        assert "WAIT_" not in old
        # torch 2.15.0: "Stage 0 at rank 0 has REDUCE_GRAD without WAIT_REDUCE_GRAD", or
        # "Rank 0 cannot start REDUCE_GRAD for stage 0 while stage 2 has a pending reduction"
        with pytest.raises(ValueError, match="without WAIT_|has a pending reduction"):
            load_compute_comms(old, p, m, v)


def test_the_installed_runtime_posts_p2p_and_skips_the_compile_guard_as_the_table_says():
    schedules = require("torch.distributed.pipelining.schedules")
    batch = inspect.getsource(schedules._batch_p2p)
    rendezvous = "op_types == {dist.isend}" in batch  # plain isend, no batch_isend_irecv
    plan = pipeplan.plan("interleaved-1f1b", 3, 1, stages_per_rank=2, comm=0.5)
    serial_deadlock = pipeplan.verify(plan, transport="serial") != []
    assert serial_deadlock
    if rendezvous:
        pipeplan.to_torch_csv(plan, torch_version=installed())  # proved under rendezvous
    else:
        with pytest.raises(pipeplan.PlanError):
            pipeplan.to_torch_csv(plan, torch_version=installed())
    runtime = schedules._PipelineScheduleRuntime
    for method in (runtime.__init__, runtime._load_csv):
        assert "_check_torch_compile_compatibility" not in inspect.getsource(method)
    assert "_check_torch_compile_compatibility" in inspect.getsource(
        schedules.ScheduleZBVZeroBubble.__init__)
