"""loads(), read() and the exception hierarchy against the CLI's messages."""

import pathlib

import pytest

import pipeplan
from conftest import python_spelling


def test_loads_detects_json_and_csv(interop_dir):
    plan = pipeplan.plan("interleaved-1f1b", 2, 4, stages_per_rank=2)
    assert pipeplan.loads(plan.to_json()) == plan
    from_csv = pipeplan.loads(plan.to_csv(), schedule="interleaved-1f1b", num_microbatches=4)
    assert from_csv == plan
    assert pipeplan.loads("  \n" + plan.to_json()) == plan
    csv = (interop_dir / "torch_zbv_p2_m4_v2.compute_only.csv").read_text()
    zbv = pipeplan.loads(csv)
    assert (zbv.meta.schedule, zbv.meta.stage_to_rank, zbv.meta.num_microbatches) == ("custom", "v", 4)
    assert pipeplan.loads(csv, mapping="v", num_microbatches=4) == zbv


def test_read_takes_str_and_pathlike(tmp_path, interop_dir):
    path = interop_dir / "torch_1f1b_p4_m8_v1.compute_only.csv"
    assert pipeplan.read(path) == pipeplan.read(str(path)) == pipeplan.loads(path.read_text())
    out = tmp_path / "x.json"
    out.write_text(pipeplan.plan("gpipe", 2, 3).to_json())
    assert pipeplan.read(out) == pipeplan.plan("gpipe", 2, 3)


def test_convert_round_trips_like_the_cli(cli, interop_dir, tmp_path):
    for path in sorted(interop_dir.glob("torch_*.csv")):
        plan = pipeplan.read(path)
        assert plan.to_json() == cli.out("convert", path, "-f", "json"), path
        assert pipeplan.loads(plan.to_json()).to_csv() == plan.to_csv() == cli.out("convert", path, "-f", "csv")


BAD_INPUTS = [
    # (file content, CLI command args after the file), errors the CLI reports with exit 2
    ("0F0,0BW0\n1F0,1B0\n", []),
    ("0F0,0B0\n1F0,0B0\n", []),
    ('{"format": "pipeplan.plan", "version": 1}', []),
    ("", []),
    ("0F0,1F0\n2F0,3F0\n", ["--mapping", "v"]),
    ('0F0,"0B0\n', []),
]


@pytest.mark.parametrize("text,args", BAD_INPUTS)
def test_input_errors_carry_the_clis_message(cli, tmp_path, text, args):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    code, message = cli.error("convert", path, "-f", "json", *args)
    assert code == 2
    kwargs = {}
    if "--mapping" in args:
        kwargs["mapping"] = args[args.index("--mapping") + 1]
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.read(path, **kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError) and isinstance(info.value, pipeplan.Error)
    assert info.value.exit_code == 2


def test_a_missing_file_is_an_input_error(cli, tmp_path):
    missing = tmp_path / "nope.json"
    code, message = cli.error("verify", missing)
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.read(missing)
    assert code == 2 and str(info.value) == python_spelling(message)


def test_a_directory_is_an_input_error_as_in_the_cli(cli, tmp_path):
    code, message = cli.error("verify", tmp_path)
    assert message == f"cannot read '{tmp_path}': it is a directory"
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.read(tmp_path)
    assert code == 2 and str(info.value) == message
    with pytest.raises(pipeplan.InputError, match="it is a directory"):
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), stage_costs=tmp_path)


def test_stages_per_rank_below_one_is_refused_as_in_the_cli(cli):
    # One rule: a given stages_per_rank (-v) is at least 1; None (no -v) is the default.
    for v in (0, -1):
        code, message = cli.error("plan", "-s", "interleaved-1f1b", "-p", 2, "-m", 4, "-v", v)
        assert code == 2 and message.startswith(f"interleaved-1f1b: stages_per_rank must be positive, got {v}")
        with pytest.raises(pipeplan.ShapeError, match=f"stages_per_rank must be positive, got {v}"):
            pipeplan.plan("interleaved-1f1b", 2, 4, stages_per_rank=v)


def test_json_contradicting_csv_options_is_refused():
    text = pipeplan.plan("1f1b", 2, 4).to_json()
    with pytest.raises(pipeplan.InputError, match="num_microbatches=8 contradicts <string>, which says num_microbatches 4"):
        pipeplan.loads(text, num_microbatches=8)
    with pytest.raises(pipeplan.InputError, match="mapping='v' contradicts"):
        pipeplan.loads(text, mapping="v")
    with pytest.raises(pipeplan.InputError, match="unknown mapping 'x'"):
        pipeplan.loads(text, mapping="x")


@pytest.mark.parametrize("args,error", [
    (("nosuch", 4, 8), pipeplan.InputError),
    (("1f1b", 4, 2), pipeplan.ShapeError),
    (("1f1b", 0, 2), pipeplan.ShapeError),
    (("1f1b", 4, 8, -1), pipeplan.ShapeError),
    (("zbv", 4, 8, 3), pipeplan.ShapeError),
    (("dualpipev", 4, 2), pipeplan.ShapeError),
])
def test_planning_errors_are_the_clis(cli, args, error):
    flags = ["-s", args[0], "-p", args[1], "-m", args[2]] + (["-v", args[3]] if len(args) > 3 else [])
    code, message = cli.error("plan", *flags)
    with pytest.raises(error) as info:
        pipeplan.plan(*args)
    assert code == 2 and str(info.value) == python_spelling(message)
    assert type(info.value) is error


def test_microbatch_count_must_be_positive():
    with pytest.raises(pipeplan.InputError, match="num_microbatches must be at least 1, got 0"):
        pipeplan.loads("0F0,0B0\n", num_microbatches=0)


def test_rank_out_of_range_is_an_input_error(cli):
    with pytest.raises(pipeplan.InputError, match=r"rank 4 is out of range for pp_degree 4 \(valid: 0..3\)"):
        pipeplan.plan("1f1b", 4, 8, rank=4)
    with pytest.raises(pipeplan.ShapeError, match="stages_per_rank must be positive, got 0"):
        pipeplan.plan("1f1b", 4, 8, stages_per_rank=0)


def test_the_hierarchy_tells_input_from_plans_that_cannot_run():
    assert issubclass(pipeplan.ShapeError, pipeplan.InputError)
    assert issubclass(pipeplan.InputError, pipeplan.Error) and issubclass(pipeplan.InputError, ValueError)
    assert issubclass(pipeplan.PlanError, pipeplan.Error) and not issubclass(pipeplan.PlanError, ValueError)
    assert issubclass(pipeplan.InternalError, pipeplan.Error)
    assert pipeplan.errors.PlanError is pipeplan.PlanError
    assert [c.exit_code for c in (pipeplan.PlanError, pipeplan.InputError, pipeplan.InternalError)] == [1, 2, 3]


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError):
        pipeplan.plan("1f1b", "four", 8)
    with pytest.raises(TypeError):
        pipeplan.verify("not a plan")
