"""from_torch() with torch-like action objects, and to_torch_csv()."""

import subprocess

import pytest

import pipeplan
from fake_torch import FakeSchedule, _Action, _ComputationType

TORCH_CASES = ["interleaved-1f1b_p2_m4_v2", "interleaved-1f1b_p4_m8_v2", "interleaved-zb_p4_m8_v2",
               "zbv_p4_m8_v2", "dualpipev_p4_m8_v2", "looped-bfs_p2_m4_v2"]


@pytest.mark.parametrize("case", TORCH_CASES)
def test_torch_orders_read_like_torchs_csv_dumps(interop_dir, case):
    compute = interop_dir / ("torch_%s.compute_only.csv" % case)
    comms = interop_dir / ("torch_%s.compute_comms.csv" % case)
    sched = FakeSchedule(compute.read_text(), comms.read_text())
    if case.startswith("interleaved-zb"):  # torch's zero-bubble orders hold idle steps
        assert any(a is None for row in sched.pipeline_order.values() for a in row)
    plan = pipeplan.from_torch(sched.pipeline_order)
    assert plan == pipeplan.read(compute)
    with_comms = pipeplan.from_torch(sched.pipeline_order_with_comms)
    assert with_comms == pipeplan.read(comms)
    assert pipeplan.verify(plan) == [] and pipeplan.verify(with_comms) == []
    m = plan.meta.num_microbatches
    assert pipeplan.from_torch(sched.pipeline_order, num_microbatches=m) == plan


def test_idle_steps_and_plain_strings():
    order = {0: ["0F0", None, "0B0"], 1: [None, _Action(1, _ComputationType.FORWARD, 0),
                                         _Action(1, _ComputationType.FULL_BACKWARD, 0)]}
    plan = pipeplan.from_torch(order)
    assert [[str(a) for a in r] for r in plan.ranks] == [["0F0", "0B0"], ["1F0", "1B0"]]
    assert pipeplan.from_torch([["0F0", None, "0B0"], [None, "1F0", "1B0"]]) == plan
    assert pipeplan.verify(plan) == []
    overlap = _Action(0, _ComputationType.OVERLAP_F_B, None,
                      (_Action(0, _ComputationType.FORWARD, 1), _Action(3, _ComputationType.FULL_BACKWARD, 0)))
    assert str(overlap) == "(0F1;3B0)OVERLAP_F_B"
    assert str(pipeplan.from_torch({0: [overlap], 1: ["1F0", "2F0"]}, mapping="v").ranks[0][0]) == str(overlap)


def test_the_metadata_options():
    order = {0: ["0F0", "0B0"], 1: ["1F0", "1B0"]}
    plan = pipeplan.from_torch(order, num_microbatches=2, schedule="gpipe")
    assert plan.meta.num_microbatches == 2 and plan.meta.schedule == "gpipe"
    assert [d.code for d in pipeplan.verify(plan)] and all(d.code for d in pipeplan.verify(plan))
    with pytest.raises(pipeplan.InputError, match="stage_to_rank v places stage 1 on rank"):
        pipeplan.from_torch({0: ["0F0", "1F0"], 1: ["2F0", "3F0"]}, mapping="v")


@pytest.mark.parametrize("order,message", [
    ({0: ["0F0", None, "0BW0"], 1: ["1F0"]}, r"^order: rank 0 step 2: unknown action '0BW0'"),
    ({0: ["0F0"], 2: ["1F0"]}, r"^order holds ranks 0, 2; expected every rank 0..1"),
    ({0: ["0F0"], 1: ["1F0", None, "0B0"]}, r"^order: rank 1 step 2: stage 0 is on rank 1 here but on rank 0 at rank 0 step 0"),
    ({0: "0F0"}, r"^order\[0\] must be a list of actions, got str"),
    ({"0": ["0F0"]}, r"^order's keys must be ranks \(int\)"),
    ({}, r"^order: no ranks"),
    ({0: [None, None]}, r"^order: no actions in any row"),
    ("0F0", r"^order must map rank -> list of actions"),
    ({0: ["0F0"], 1: ["1F0"], 2: [None, "3F0"]}, r"^order: rank 2 step 1: 3 rows \(ranks\) but stages 0..3"),
])
def test_bad_orders_are_input_errors_naming_the_entry(order, message):
    with pytest.raises(pipeplan.InputError, match=message):
        pipeplan.from_torch(order)


def test_a_broken_torch_order_fails_check(interop_dir):
    text = (interop_dir / "moved_recv_interleaved-1f1b_p2_m4_v2.csv").read_text()
    sched = FakeSchedule(text)
    with pytest.raises(pipeplan.PlanError) as info:
        pipeplan.check(pipeplan.from_torch(sched.pipeline_order))
    assert {"fifo-both-send", "deadlock"} <= {d.code for d in info.value.diagnostics}


def crlf(text):
    """pipeplan's CSV with torch's row ends: Python's csv.writer ends rows with \\r\\n."""
    return text.replace("\n", "\r\n")


def test_to_torch_csv_is_what_torchs_load_csv_reads(cli, tmp_path):
    compute = pipeplan.plan("interleaved-1f1b", 2, 4, stages_per_rank=2, compute_only=True)
    assert pipeplan.to_torch_csv(compute) == crlf(compute.to_csv())  # format="compute_only"
    path = tmp_path / "sched.csv"
    path.write_bytes(pipeplan.to_torch_csv(compute).encode())
    expected = subprocess.run(
        [str(cli.path), "lower", str(path), "-s", "interleaved-1f1b", "--reduce-grad",
         "-f", "torch-csv"], capture_output=True, check=True).stdout.decode()
    lowered = pipeplan.lower(pipeplan.read(path, schedule="interleaved-1f1b"))
    assert pipeplan.to_torch_csv(lowered) == expected  # format="compute_comms" needs REDUCE_GRAD
    assert "REDUCE_GRAD" in expected and "REDUCE_GRAD" not in lowered.to_csv()
    # torch 2.15's runtime retires each send at a WAIT_SEND_F/B (schedules.py's
    # _validate_send_waits): rows with sends carry them; pipeplan reads them as nothing.
    no_reduce = pipeplan.to_torch_csv(lowered, reduce_grad=False)
    assert "WAIT_SEND_F" in no_reduce and "WAIT_SEND_B" in no_reduce and "REDUCE_GRAD" not in no_reduce
    waitless = ",".join(c for c in no_reduce.replace("\r\n", "\n").replace("\n", ",\n,").split(",")
                        if "WAIT_" not in c).replace(",\n,", "\n")
    assert crlf(waitless) == crlf(lowered.to_csv())
    assert "0WAIT_REDUCE_GRAD" in expected
    twice = pipeplan.loads(pipeplan.to_torch_csv(lowered))
    assert pipeplan.to_torch_csv(twice) == expected  # never added twice
    assert pipeplan.verify(twice) == []
    with pytest.raises(pipeplan.InputError):
        pipeplan.to_torch_csv(pipeplan.plan("1f1b", 2, 2, rank=0))


def test_to_torch_csv_refuses_memory_actions():
    plan = pipeplan.loads("0F0,0F1,0RECOMPUTE0,0B0,0B1\n1F0,1B0,1F1,1B1\n")
    assert plan.has_memory_actions
    assert [a.is_memory for a in plan.ranks[0]] == [False, False, True, False, False]
    assert plan.ranks[0][2].type == "RECOMPUTE" and plan.ranks[0][2].is_compute
    assert pipeplan.Action("0OFFLOAD3").type == "OFFLOAD"
    with pytest.raises(pipeplan.InputError, match="torch's CSV dialect has no memory actions, and "
                       r"the plan holds 0RECOMPUTE0 \(rank 0 index 2\)"):
        pipeplan.to_torch_csv(plan)
    assert plan.to_csv() == "0F0,0F1,0RECOMPUTE0,0B0,0B1\n1F0,1B0,1F1,1B1\n"  # pipeplan's own CSV


def test_to_torch_csv_for_a_torch_release(cli, tmp_path):
    """torch_version= says which torch the file is for, as the CLI's --torch-version
    (read from each release's torch/distributed/pipelining/schedules.py)."""
    compute = pipeplan.plan("interleaved-1f1b", 2, 4, stages_per_rank=2, compute_only=True)
    path = tmp_path / "sched.csv"
    path.write_text(compute.to_csv())
    lowered = pipeplan.lower(pipeplan.read(path, schedule="interleaved-1f1b"))
    for version in ("2.10", "2.11", "2.14.1", "2.15", "2.15.0+cu132"):
        expected = cli.out("lower", path, "-s", "interleaved-1f1b", "--reduce-grad",
                           "-f", "torch-csv", "--torch-version", version)
        # (cli.out reads text: "\r\n" arrives as "\n")
        assert pipeplan.to_torch_csv(lowered, torch_version=version).replace("\r\n", "\n") == expected
    # Before 2.15 no WAIT_* cells (torch 2.14.0 has no such tokens).
    old = pipeplan.to_torch_csv(lowered, torch_version="2.11")
    assert "WAIT_" not in old and "REDUCE_GRAD" in old
    assert pipeplan.to_torch_csv(lowered) == pipeplan.to_torch_csv(lowered, torch_version="2.15")
    # REDUCE_GRAD arrived in 2.10.0: not added by default before, refused when asked.
    assert "REDUCE_GRAD" not in pipeplan.to_torch_csv(lowered, torch_version="2.9")
    with pytest.raises(pipeplan.InputError, match=r"torch-csv: torch 2\.9's runtime has no "
                       r"REDUCE_GRAD, and the plan holds 2REDUCE_GRAD \(rank 0 index 37\); "
                       r"torch has REDUCE_GRAD from 2\.10 on"):
        pipeplan.to_torch_csv(lowered, reduce_grad=True, torch_version="2.9")
    for bad in ("2", "2.x", "latest"):
        with pytest.raises(pipeplan.InputError, match="is not MAJOR.MINOR"):
            pipeplan.to_torch_csv(lowered, torch_version=bad)
    with pytest.raises(pipeplan.InputError, match=r"older than the oldest runtime pipeplan "
                       r"writes for \(2\.6\)"):
        pipeplan.to_torch_csv(compute, torch_version="2.5")


def test_to_torch_csv_proves_under_the_releases_transport(cli, tmp_path):
    """torch <= 2.11 posts each SEND/RECV as a batch_isend_irecv: one stream per
    rank (serial). A lowering that prefetches from two peers deadlocks there."""
    prefetched = pipeplan.plan("interleaved-1f1b", 3, 1, stages_per_rank=2, comm=0.5)
    assert pipeplan.verify(prefetched, transport="serial") != []
    assert "SEND_F" in pipeplan.to_torch_csv(prefetched, torch_version="2.12")
    with pytest.raises(pipeplan.PlanError) as e:
        pipeplan.to_torch_csv(prefetched, torch_version="2.11")
    path = tmp_path / "p.csv"
    path.write_text(prefetched.to_csv())
    code, message = cli.error("convert", path, "-f", "torch-csv", "--torch-version", "2.11")
    assert code == 1 and str(e.value).startswith(message)
    assert e.value.diagnostics and "waiting chain" in str(e.value)


def test_to_torch_csv_warns_split_backward_escapes_the_compile_guard():
    with pytest.warns(UserWarning, match=r"splits backward \(I/W\).*pytorch#143599"):
        pipeplan.to_torch_csv(pipeplan.plan("zb-h1", 2, 2))
