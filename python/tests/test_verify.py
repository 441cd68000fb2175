"""verify(), check() and lower() against `pipeplan verify` and `pipeplan lower`."""

import json

import pytest

import pipeplan

EDIT = """0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1
1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1
"""


def cli_diagnostics(cli, path, model):
    r = cli.run("verify", path, "--model", model, "-f", "json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    return r.returncode, doc["models"][0]["diagnostics"]


@pytest.mark.parametrize("model", ["rendezvous", "eager", "serial"])
def test_diagnostics_are_the_clis(cli, tmp_path, interop_dir, model):
    files = [interop_dir / "moved_recv_1f1b_p2_m2.csv",
             interop_dir / "moved_recv_interleaved-1f1b_p2_m4_v2.csv",
             interop_dir / "missing_mb_gpipe_p2_m3.csv",
             interop_dir / "torch_zbv_p2_m4_v2.compute_comms.csv"]
    edit = tmp_path / "sched_edit.csv"
    edit.write_text(EDIT)
    for path in files + [edit]:
        code, expected = cli_diagnostics(cli, path, model)
        got = pipeplan.verify(pipeplan.read(path), transport=model)
        assert [d.to_dict() for d in got] == expected, path
        assert (code == 0) == (got == [])


def test_a_deadlocking_edit_is_located():
    diags = pipeplan.verify(pipeplan.loads(EDIT))
    first = diags[0]
    assert (first.code, first.rank, first.index, first.action) == ("fifo-both-send", 0, 3, "0SEND_F1")
    assert "both send" in first.message
    assert str(first).startswith("error[fifo-both-send] rank 0 index 3 (0SEND_F1): pair 0-1")
    assert diags[-1].code == "deadlock" and diags[-1].rank is None and diags[-1].action is None
    assert pipeplan.verify(pipeplan.loads(EDIT), "eager") == []
    assert "Diagnostic(code='fifo-both-send'" in repr(first)


def test_check_raises_plan_error_with_the_clis_text(cli, tmp_path):
    pipeplan.check(pipeplan.plan("zbv", 4, 8))  # proved: no exception
    path = tmp_path / "e.csv"
    path.write_text(EDIT)
    with pytest.raises(pipeplan.PlanError) as info:
        pipeplan.check(pipeplan.read(path))
    err = info.value
    assert err.diagnostics == pipeplan.verify(pipeplan.read(path))
    assert isinstance(err, pipeplan.Error) and not isinstance(err, pipeplan.InputError)
    assert str(err) == cli.run("verify", path).stdout.rstrip("\n")


def test_compute_only_plans_are_lowered_then_proved(cli, interop_dir):
    path = interop_dir / "torch_interleaved-1f1b_p2_m4_v2.compute_only.csv"
    plan = pipeplan.read(path)
    assert plan.compute_only and pipeplan.verify(plan) == []
    assert "lowered" in cli.out("verify", path)
    code, expected = cli_diagnostics(cli, interop_dir / "missing_mb_gpipe_p2_m3.csv", "rendezvous")
    assert code == 1 and expected


def test_a_partial_plan_gets_the_partial_plan_diagnostic():
    diags = pipeplan.verify(pipeplan.plan("1f1b", 4, 8, rank=1))
    assert [d.code for d in diags] == ["partial-plan"]


def test_an_unknown_transport_is_an_input_error():
    with pytest.raises(pipeplan.InputError, match="unknown transport 'nccl'"):
        pipeplan.verify(pipeplan.plan("1f1b", 2, 2), transport="nccl")


@pytest.mark.parametrize("schedule,v", [("1f1b", None), ("interleaved-1f1b", 2), ("zbv", None)])
def test_lower_is_the_clis_lower(cli, tmp_path, schedule, v):
    compute = pipeplan.plan(schedule, 4, 8, stages_per_rank=v, compute_only=True)
    lowered = pipeplan.lower(compute)
    assert lowered == pipeplan.plan(schedule, 4, 8, stages_per_rank=v)
    path = tmp_path / "c.json"
    path.write_text(compute.to_json())
    assert lowered.to_json() == cli.out("lower", path)
    for placement in ("earliest", "parity"):
        got = pipeplan.lower(compute, send_placement=placement, reduce_grad=True)
        assert got.to_json() == cli.out("lower", path, "--send-placement", placement, "--reduce-grad")
        assert pipeplan.verify(got) == []


def test_lower_refusals_match_the_cli(cli, tmp_path, interop_dir):
    with_comms = pipeplan.plan("1f1b", 2, 2)
    with pytest.raises(pipeplan.InputError, match=r"already has communication \(0SEND_F0\)"):
        pipeplan.lower(with_comms)
    with pytest.raises(pipeplan.InputError, match="lower needs every rank"):
        pipeplan.lower(pipeplan.plan("1f1b", 2, 2, rank=0, compute_only=True))
    with pytest.raises(pipeplan.InputError, match="unknown send_placement 'late'"):
        pipeplan.lower(pipeplan.plan("1f1b", 2, 2, compute_only=True), send_placement="late")
    bad = interop_dir / "missing_mb_gpipe_p2_m3.csv"
    with pytest.raises(pipeplan.PlanError) as info:
        pipeplan.lower(pipeplan.read(bad))
    assert info.value.diagnostics
    assert cli.run("lower", bad).returncode == 1
    # Ranks that wait on each other: rank 0 needs 1B0 before 0F1, rank 1 needs 0F1 first.
    stuck = pipeplan.loads("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
    assert cli.run("lower", "-", input=stuck.to_csv()).returncode == 1
    with pytest.raises(pipeplan.PlanError, match="cyclic wait across ranks") as info:
        pipeplan.lower(stuck)
    assert [(d.code, d.rank, d.action) for d in info.value.diagnostics] == [
        ("sim-deadlock", 0, "0B0"), ("sim-deadlock", 1, "1F1")]
    # verify() reports it as diagnostics (the CLI's verify exits 2 with lower's message).
    assert pipeplan.verify(stuck) == info.value.diagnostics
