"""simulate() and compare() against `pipeplan simulate` and `pipeplan compare`."""

import json

import pytest

import pipeplan
from conftest import python_spelling

STAGE_COSTS_CSV = "stage,F,B,I,W\n0,2,2,2,2\n3,1.5,1,1,1\n"
# What `pipeplan calibrate` writes: absolute durations (ms) and a measured transfer cost.
CALIBRATED_JSON = ('{"absolute": true, "time_unit": "ms", "calibrated_from": {"stages_per_rank": 2},'
                   ' "comm": {"latency": 0.2}, "stages": [{"stage": 0, "F": 2, "B": 4, "I": 2, "W": 2},'
                   ' {"stage": 1, "F": 1.5, "B": 3, "I": 1.5, "W": 1.5}]}')

CASES = [
    # (CLI options, the same as keyword arguments)
    ([], {}),
    (["--cost", "F=1,B=3"], {"cost": "F=1,B=3"}),
    (["--cost", "F=2,I=1,W=1,OVERLAP_F_B=2.5"], {"cost": {"F": 2, "I": 1, "W": 1, "OVERLAP_F_B": 2.5}}),
    (["--comm", "0.5"], {"comm": 0.5}),
    (["--comm", "0.25,100", "--bytes", "50"], {"comm": "0.25,100", "bytes": 50}),
    (["--comm", "0.25,100", "--bytes", "50"], {"comm": (0.25, 100), "bytes": 50}),
    (["--model", "eager", "--comm", "1"], {"model": "eager", "comm": 1}),
    (["--model", "serial"], {"model": "serial"}),
    (["--stage-costs", "STAGES"], {"stage_costs": "STAGES"}),
    (["--stage-costs", "STAGES"], {"stage_costs": {0: 2, 3: {"F": 1.5, "B": 1, "I": 1, "W": 1}}}),
    (["--compute-only"], {"compute_only": True}),
    (["--stage-costs", "CALIB"], {"stage_costs": "CALIB"}),
    (["--stage-costs", "CALIB", "--comm", "1"], {"stage_costs": "CALIB", "comm": "1"}),
]


@pytest.mark.parametrize("schedule,v", [("1f1b", None), ("interleaved-1f1b", 2), ("zbv", None)])
@pytest.mark.parametrize("args,kwargs", CASES)
def test_reports_are_the_clis(cli, tmp_path, schedule, v, args, kwargs):
    stages = tmp_path / "stages.csv"
    stages.write_text(STAGE_COSTS_CSV)
    calibrated = tmp_path / "calibrated.json"
    calibrated.write_text(CALIBRATED_JSON)
    files = {"STAGES": str(stages), "CALIB": str(calibrated)}
    args = [files.get(a, a) for a in args]
    kwargs = {k: files.get(val, val) if isinstance(val, str) else val for k, val in kwargs.items()}
    path = tmp_path / "p.json"
    if kwargs.get("model") == "serial":
        # One stream per rank needs a serial-safe lowering (an option of the
        # default latency-hiding lowering; 1f1b's seed order has it anyway).
        flags = ["-v", v] if v else []
        path.write_text(cli.out("plan", "-s", schedule, "-p", 4, "-m", 8, *flags, "--serial-safe"))
        plan = pipeplan.read(path)
    else:
        plan = pipeplan.plan(schedule, 4, 8, stages_per_rank=v)
        path.write_text(plan.to_json())
    result = pipeplan.simulate(plan, **kwargs)
    assert result.to_json() == cli.out("simulate", path, *args, "-f", "json")
    assert result.to_text() == cli.out("simulate", path, *args)
    doc = json.loads(result.to_json())
    assert result.makespan == pytest.approx(doc["makespan"], abs=1e-9)
    assert result.bubble_fraction == pytest.approx(doc["bubble_fraction"], abs=1e-9)
    assert result.peak_activations == [r["peak_activations"] for r in doc["ranks"]]


def test_the_readmes_example():
    r = pipeplan.simulate(pipeplan.plan("1f1b", 4, 8))
    assert r.ok and r.makespan == 33 and r.peak_activations == [4, 3, 2, 1]
    assert [s.rank for s in r.ranks] == [0, 1, 2, 3]
    assert r.ranks[0].busy == 24 and r.ranks[0].idle == 9
    assert 0 < r.bubble_fraction < 1
    times = r.action_times()
    assert len(times) == 4 and len(times[0]) == len(r.plan.ranks[0])
    assert r.to_svg().startswith("<svg") or "<svg" in r.to_svg()
    assert json.loads(r.to_chrome_trace())


def test_lowering_a_compute_only_plan_first(cli, tmp_path):
    compute = pipeplan.plan("1f1b", 4, 8, compute_only=True)
    path = tmp_path / "c.json"
    path.write_text(compute.to_json())
    lowered = pipeplan.simulate(compute, lower=True, comm=1)
    assert lowered.to_json() == cli.out("simulate", path, "--lower", "--comm", "1", "-f", "json")
    assert not lowered.compute_only and lowered.plan == pipeplan.plan("1f1b", 4, 8)
    assert pipeplan.simulate(compute).compute_only


def test_a_plan_that_cannot_run_raises_or_reports(cli, tmp_path, interop_dir):
    path = tmp_path / "edit.csv"
    path.write_text("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n")
    plan = pipeplan.read(path)
    r = cli.run("simulate", path, "-f", "json")
    assert r.returncode == 1
    with pytest.raises(pipeplan.PlanError, match="cannot run to completion under the rendezvous model") as info:
        pipeplan.simulate(plan)
    assert info.value.diagnostics
    failed = pipeplan.simulate(plan, check=False)
    assert not failed.ok and failed.problems == info.value.diagnostics
    assert failed.to_json() == r.stdout
    assert pipeplan.simulate(plan, model="eager").ok
    bad = interop_dir / "missing_mb_gpipe_p2_m3.csv"
    assert cli.run("simulate", bad).returncode == 1
    with pytest.raises(pipeplan.PlanError, match="not valid"):
        pipeplan.simulate(pipeplan.read(bad))


@pytest.mark.parametrize("kwargs,cli_args", [
    ({"cost": "F=-1"}, ["--cost", "F=-1"]),
    ({"cost": "Q=1"}, ["--cost", "Q=1"]),
    ({"comm": "x"}, ["--comm", "x"]),
    ({"comm": "1,-2"}, ["--comm", "1,-2"]),
])
def test_bad_cost_options_are_the_clis_input_errors(cli, tmp_path, kwargs, cli_args):
    path = tmp_path / "p.json"
    path.write_text(pipeplan.plan("1f1b", 2, 2).to_json())
    code, message = cli.error("simulate", path, *cli_args)
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), **kwargs)
    # The same message, naming the keyword without the CLI's dashes.
    assert code == 2 and message.startswith("--") and str(info.value) == message[2:]


def test_more_bad_options():
    plan = pipeplan.plan("1f1b", 2, 2)
    with pytest.raises(pipeplan.InputError, match="^model 'nccl' is not a transport"):
        pipeplan.simulate(plan, model="nccl")
    with pytest.raises(pipeplan.InputError, match="cannot read '/nonexistent/stages.csv': no such file"):
        pipeplan.simulate(plan, stage_costs="/nonexistent/stages.csv")
    with pytest.raises(pipeplan.InputError, match="simulating needs every rank"):
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 2, rank=0))
    with pytest.raises(pipeplan.InputError):
        pipeplan.simulate(plan, stage_costs={0: -1})
    with pytest.raises(pipeplan.InputError):
        pipeplan.simulate(plan, bytes=-1)


@pytest.mark.parametrize("args,kwargs", [
    ([], {}),
    (["-v", "2"], {"stages_per_rank": 2}),
    (["--schedules", "1f1b,zbv,gpipe"], {"schedules": ["1f1b", "zbv", "gpipe"]}),
    (["--cost", "F=1,B=2", "--comm", "0.5", "--model", "eager"], {"cost": "F=1,B=2", "comm": 0.5, "model": "eager"}),
    (["--stage-costs", "CALIB"], {"stage_costs": "CALIB"}),
    (["--lowering", "seed", "--comm", "1"], {"lowering": "seed", "comm": 1}),
    (["--lowering", "latency-hiding", "--prefetch", "1", "--serial-safe", "--comm", "1"],
     {"lowering": "latency-hiding", "prefetch": 1, "serial_safe": True, "comm": 1}),
])
def test_compare_is_the_clis(cli, tmp_path, args, kwargs):
    calibrated = tmp_path / "calibrated.json"
    calibrated.write_text(CALIBRATED_JSON)
    args = [str(calibrated) if a == "CALIB" else a for a in args]
    kwargs = {k: str(calibrated) if v == "CALIB" else v for k, v in kwargs.items()}
    result = pipeplan.compare(4, 8, **kwargs)
    # Skipped rows name the shape in each front end's words (-v / stages_per_rank).
    assert result.to_json() == python_spelling(cli.out("compare", "-p", 4, "-m", 8, *args, "-f", "json"))
    assert result.to_text() == python_spelling(cli.out("compare", "-p", 4, "-m", 8, *args))
    ran = [r for r in result.rows if r.skipped is None]
    assert ran and result.best.schedule == ran[0].schedule
    assert [r.makespan for r in ran] == sorted(r.makespan for r in ran)
    assert len(result) == len(result.rows) == len(list(result))


def test_compare_lowering_keywords():
    # At latency 1 the latency-hiding lowering is never slower than the seed's.
    seed = pipeplan.compare(4, 8, schedules=["interleaved-1f1b", "zbv"], comm=1, lowering="seed")
    hiding = pipeplan.compare(4, 8, schedules=["interleaved-1f1b", "zbv"], comm=1,
                              lowering="latency-hiding")
    for name in ("interleaved-1f1b", "zbv"):
        assert hiding[name].makespan <= seed[name].makespan
    assert any(hiding[n].makespan < seed[n].makespan for n in ("interleaved-1f1b", "zbv"))
    with pytest.raises(pipeplan.InputError, match="unknown lowering 'fast'"):
        pipeplan.compare(4, 8, lowering="fast")
    with pytest.raises(pipeplan.InputError, match="prefetch must be"):
        pipeplan.compare(4, 8, prefetch=-1)


def test_compare_errors_and_lookup(cli):
    result = pipeplan.compare(4, 8, schedules=["1f1b", "zbv"])
    assert result["1f1b"].schedule == "1f1b" and result["Schedule1F1B"].schedule == "1f1b"
    assert result["zbv"].peak_rank_activations > 0
    with pytest.raises(pipeplan.InputError, match="unknown schedule|nosuch"):
        pipeplan.compare(4, 8, schedules=["nosuch"])
    code, message = cli.error("compare", "-p", 4, "-m", 2, "--schedules", "1f1b")
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.compare(4, 2, schedules=["1f1b"])
    assert code == 2 and str(info.value) == message
