"""The torchtitan-style example of docs/python.md, run as written."""

import pathlib
import re

import pytest

import pipeplan
from conftest import SOURCE_DIR
from fake_torch import FakeSchedule


def example_namespace():
    doc = (SOURCE_DIR / "docs" / "python.md").read_text()
    m = re.search(r"<!-- example: torchtitan -->\n```python\n(.*?)```\n<!-- end example -->", doc, re.S)
    assert m, "docs/python.md lost its example block"
    namespace = {}
    exec(compile(m.group(1), "docs/python.md", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("case,m", [("interleaved-1f1b_p4_m8_v2", 8), ("zbv_p4_m8_v2", 8),
                                     ("dualpipev_p2_m4_v2", 4), ("interleaved-zb_p2_m4_v2", 4)])
def test_the_example_passes_torchs_schedules(interop_dir, case, m):
    ex = example_namespace()
    sched = FakeSchedule((interop_dir / ("torch_%s.compute_only.csv" % case)).read_text(),
                         (interop_dir / ("torch_%s.compute_comms.csv" % case)).read_text())
    result = ex["check_pipeline_schedule"](sched, m)
    assert result.ok and result.makespan > 0


def test_the_example_fails_a_hang_prone_order(interop_dir):
    ex = example_namespace()
    sched = FakeSchedule((interop_dir / "torch_interleaved-1f1b_p2_m4_v2.compute_only.csv").read_text(),
                         (interop_dir / "moved_recv_interleaved-1f1b_p2_m4_v2.csv").read_text())
    with pytest.raises(pipeplan.PlanError) as info:
        ex["check_pipeline_schedule"](sched, 4)
    assert "error[fifo-both-send]" in str(info.value)
    assert "fifo-both-send" in {d.code for d in info.value.diagnostics}
    sched.pipeline_order_with_comms = None  # the compute order itself is fine
    assert ex["check_pipeline_schedule"](sched, 4).ok


def test_the_example_catches_a_miscounted_order(interop_dir):
    # torch 2.11's Schedule1F1B dump for p=4, m=8 has rank 3 run 3F1..3F8 (no 3F0).
    ex = example_namespace()
    sched = FakeSchedule((interop_dir / "torch_1f1b_p4_m8_v1.compute_only.csv").read_text())
    with pytest.raises(pipeplan.PlanError) as info:
        ex["check_pipeline_schedule"](sched, 8)
    assert [d.code for d in info.value.diagnostics] == ["microbatch-out-of-range"]
    assert "3F8 names microbatch 8, but the plan has 8 microbatches (0..7)" in str(info.value)


def test_the_example_writes_what_torch_loads(tmp_path):
    ex = example_namespace()
    path = tmp_path / "sched.csv"
    plan = ex["write_schedule_csv"](str(path), "zbv", 4, 8)
    assert path.read_bytes().decode() == pipeplan.to_torch_csv(plan)
    assert path.read_text() == plan.to_csv()  # the same rows; torch's csv.writer ends them \r\n
    back = FakeSchedule(path.read_text())
    assert pipeplan.from_torch(back.pipeline_order, num_microbatches=8, schedule="zbv") == plan
    with pytest.raises(pipeplan.ShapeError):
        ex["write_schedule_csv"](str(path), "1f1b", 4, 2)
