"""verify(), check() and lower() against `pipeplan verify` and `pipeplan lower`."""

import json
import re

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
    # One diagnostic naming every stuck rank, as `pipeplan lower` and
    # `pipeplan verify` print it (the library's prove(), not a rule of its own).
    assert [(d.code, d.rank, d.action) for d in info.value.diagnostics] == [
        ("compute-cycle", None, None)]
    assert "rank 0 waits at 0B0 (index 1)" in info.value.diagnostics[0].message
    # verify() reports it as diagnostics, as the CLI's verify does (exit 1).
    assert pipeplan.verify(stuck) == info.value.diagnostics
    verified = cli.run("verify", "-", input=stuck.to_csv())
    assert verified.returncode == 1
    assert str(info.value.diagnostics[0]) in verified.stdout


LOWERING_CASES = [
    # (keywords, the CLI's `lower` flags)
    (dict(lowering="seed"), ["--lowering", "seed"]),
    (dict(lowering="latency-hiding"), ["--lowering", "latency-hiding"]),
    (dict(prefetch=2), ["--prefetch", "2"]),
    (dict(serial_safe=True), ["--serial-safe"]),
    (dict(comm=1), ["--comm", "1"]),
    (dict(comm=(0.1, 100), bytes=40), ["--comm", "0.1,100", "--bytes", "40"]),
    (dict(cost="F=1,B=3,I=2,W=1", comm="0.5"), ["--cost", "F=1,B=3,I=2,W=1", "--comm", "0.5"]),
    (dict(stage_costs={0: 2.0, 3: 1.5}, comm=0.5, prefetch=3, serial_safe=True),
     ["--stage-costs", "STAGES", "--comm", "0.5", "--prefetch", "3", "--serial-safe"]),
    (dict(lowering="latency-hiding", comm=1, prefetch=1), ["--lowering", "latency-hiding", "--comm", "1",
                                                           "--prefetch", "1"]),
]


@pytest.mark.parametrize("schedule,v", [("1f1b", None), ("interleaved-1f1b", 2), ("zbv", None),
                                        ("dualpipev", None)])
@pytest.mark.parametrize("kwargs,flags", LOWERING_CASES)
def test_lowering_options_are_the_clis(cli, tmp_path, schedule, v, kwargs, flags):
    compute = pipeplan.plan(schedule, 4, 8, stages_per_rank=v, compute_only=True)
    path = tmp_path / "c.json"
    path.write_text(compute.to_json())
    stages = tmp_path / "stages.csv"
    stages.write_text("0,2.0\n3,1.5\n")
    flags = [str(stages) if f == "STAGES" else f for f in flags]
    lowered = pipeplan.lower(compute, **kwargs)
    assert lowered.to_json() == cli.out("lower", path, *flags)
    # plan() takes the same keywords as `pipeplan plan` takes the flags.
    shape = ["-s", schedule, "-p", 4, "-m", 8] + (["-v", v] if v else [])
    assert pipeplan.plan(schedule, 4, 8, stages_per_rank=v, **kwargs) == lowered
    assert pipeplan.plan(schedule, 4, 8, stages_per_rank=v, **kwargs).to_json() == cli.out(
        "plan", *shape, *flags)
    assert pipeplan.plan(schedule, 4, 8, stages_per_rank=v, rank=1, **kwargs).ranks[0] == lowered.ranks[1]
    assert pipeplan.verify(lowered) == [] and pipeplan.verify(lowered, transport="eager") == []
    if kwargs.get("serial_safe"):
        assert pipeplan.verify(lowered, transport="serial") == []


def test_lowering_choices_change_the_plan():
    compute = pipeplan.plan("interleaved-1f1b", 4, 8, stages_per_rank=2, compute_only=True)
    default = pipeplan.lower(compute)
    assert default == pipeplan.lower(compute, lowering="latency-hiding")  # its schedule's own
    seed = pipeplan.lower(compute, lowering="seed")
    assert seed != default
    # The seed lowering posts each RECV right before its consumer (the next
    # compute), latency hiding some further ahead.
    def gaps(plan):
        out = []
        for actions in plan.ranks:
            names = [str(a) for a in actions]
            for i, a in enumerate(names):
                m = re.fullmatch(r"(\d+)RECV_[FB](\d+)", a)
                if m:
                    nxt = next(n for n in names[i + 1:] if "SEND" not in n and "RECV" not in n)
                    out.append(re.fullmatch(r"(\d+)[FBI](\d+)", nxt).groups() == m.groups())
        return out
    assert all(gaps(seed)) and not all(gaps(default))
    # gpipe and 1f1b keep the seed order unless asked.
    compute = pipeplan.plan("1f1b", 4, 8, compute_only=True)
    assert pipeplan.lower(compute) == pipeplan.lower(compute, lowering="seed")
    hiding = pipeplan.lower(compute, lowering="latency-hiding", comm=1)
    assert hiding != pipeplan.lower(compute)
    # Latency hiding is at least as fast as the seed order on the model it planned for.
    fast = pipeplan.simulate(hiding, comm=1).makespan
    assert fast <= pipeplan.simulate(pipeplan.lower(compute), comm=1).makespan
    assert fast == pipeplan.simulate(compute, comm=1).makespan  # the eager bound
    # A prefetch cap bounds the receive buffers a rank holds.
    capped = pipeplan.lower(pipeplan.plan("zbv", 4, 16, compute_only=True), prefetch=1, comm=1)
    assert max(r.peak_recv_buffers for r in pipeplan.simulate(capped, comm=1).ranks) <= 2


@pytest.mark.parametrize("kwargs,message", [
    (dict(lowering="fast"), "unknown lowering 'fast' (expected latency-hiding, seed or exact)"),
    (dict(prefetch=-1), "prefetch must be in 0..1073741824"),
    (dict(prefetch=1.5), "prefetch must be an int"),
    (dict(prefetch=True), "prefetch must be an int"),
    (dict(comm="x"), "comm latency 'x' is not a non-negative number"),
    (dict(cost="F=-1"), "F"),
])
def test_bad_lowering_options_are_input_errors(kwargs, message):
    compute = pipeplan.plan("zbv", 2, 4, compute_only=True)
    with pytest.raises(pipeplan.InputError, match=re.escape(message)):
        pipeplan.lower(compute, **kwargs)
    with pytest.raises(pipeplan.InputError, match=re.escape(message)):
        pipeplan.plan("zbv", 2, 4, **kwargs)


# p=3, v=2, forward-only: rank 1 receives stage 4's input before it sends
# stage 1's output; runs where sends are posted and left, hangs where each
# transfer is waited where it stands (tests/runtime_names_test.cc).
RING = """0F0,0SEND_F0,3RECV_F0,3F0,3SEND_F0
1RECV_F0,1F0,4RECV_F0,1SEND_F0,4F0,4SEND_F0
2RECV_F0,2F0,2SEND_F0,5RECV_F0,5F0
"""


def test_runtimes_are_the_clis_list(cli):
    names = [r.name for r in pipeplan.runtimes()]
    assert names == ["torch-2.11", "torch", "megatron", "megatron-batched", "megatron-overlap",
                     "deepspeed", "dualpipe", "pipeplan-gloo", "pipeplan-nccl"]
    listed = cli.run("verify", "--runtime", "list")
    assert listed.returncode == 0, listed.stderr
    for r in pipeplan.runtimes():
        assert r.source in listed.stdout
        assert r.model in pipeplan.transport_models()
        assert r.waits in ("at-post", "before-use")
    assert pipeplan.transport_models() == ["rendezvous", "eager", "serial"]
    dualpipe = pipeplan.runtimes()[6]
    assert (dualpipe.aliases, dualpipe.model, dualpipe.waits) == (["dualpipev"], "serial", "at-post")


def test_the_pyi_names_every_runtime_and_model(source_dir):
    pyi = (source_dir / "python" / "pipeplan" / "__init__.pyi").read_text()
    literal = pyi[pyi.index("RuntimeName = Literal["):]
    literal = literal[:literal.index("]")]
    quoted = re.findall(r'"([^"]+)"', literal)
    expected = []
    for r in pipeplan.runtimes():
        expected += [r.name] + r.aliases
    assert sorted(quoted) == sorted(expected)
    transport = re.search(r"^Transport = Literal\[(.*)\]$", pyi, re.M).group(1)
    assert re.findall(r'"([^"]+)"', transport) == pipeplan.transport_models()


def test_verify_with_a_runtime_is_the_clis(cli, tmp_path):
    plan = pipeplan.loads(RING, num_microbatches=1, forward_only=True)
    path = tmp_path / "ring.csv"
    path.write_text(RING)
    for runtime in [r.name for r in pipeplan.runtimes()]:
        r = cli.run("verify", path, "-m", "1", "--forward-only", "--runtime", runtime,
                    "-f", "json")
        assert r.returncode in (0, 1), r.stderr
        doc = json.loads(r.stdout)
        assert doc["models"][0]["runtime"] == runtime
        got = [(d.code, d.rank, d.index, d.message)
               for d in pipeplan.verify(plan, runtime=runtime)]
        want = [(d["code"], d["rank"], d["index"], d["message"])
                for d in doc["models"][0]["diagnostics"]]
        assert got == want, runtime
    assert pipeplan.verify(plan, runtime="torch") == []
    assert pipeplan.verify(plan, runtime="megatron") != []
    with pytest.raises(pipeplan.PlanError, match="FAILED under runtime megatron"):
        pipeplan.check(plan, runtime="megatron")
    with pytest.raises(pipeplan.InputError, match="give transport or runtime, not both"):
        pipeplan.verify(plan, transport="serial", runtime="torch")
    with pytest.raises(pipeplan.InputError, match="unknown runtime 'nccl'"):
        pipeplan.verify(plan, runtime="nccl")
    with pytest.raises(pipeplan.InputError, match="expected rendezvous, eager or serial"):
        pipeplan.verify(plan, transport="nccl")


def test_plan_and_lower_for_a_runtime_are_the_clis(cli):
    hang = dict(stages_per_rank=2, comm=0.5)
    plain = pipeplan.plan("interleaved-1f1b", 3, 1, **hang)
    assert pipeplan.verify(plain, runtime="torch-2.11") != []
    safe = pipeplan.plan("interleaved-1f1b", 3, 1, runtime="torch-2.11", **hang)
    assert pipeplan.verify(safe, runtime="torch-2.11") == []
    r = cli.run("plan", "-s", "interleaved-1f1b", "-p", "3", "-m", "1", "-v", "2", "--comm", "0.5",
                "--runtime", "torch-2.11", "-f", "csv")
    assert r.returncode == 0, r.stderr
    assert safe.to_csv() == r.stdout
    order = pipeplan.plan("interleaved-1f1b", 3, 1, compute_only=True, stages_per_rank=2)
    lowered = pipeplan.lower(order, comm=0.5, runtime="torch-2.11")
    assert pipeplan.verify(lowered, runtime="torch-2.11") == []
    # A lowering the caller chose is not changed: refused, the runtime named.
    with pytest.raises(pipeplan.PlanError, match="runtime 'torch-2.11'"):
        pipeplan.plan("interleaved-1f1b", 3, 1, runtime="torch-2.11", lowering="latency-hiding",
                      **hang)
    # A torch CSV is proved under both torch runtimes unless told which.
    with pytest.raises(pipeplan.PlanError, match="torch's runtime 'torch-2.11'"):
        pipeplan.to_torch_csv(plain)
    assert pipeplan.to_torch_csv(plain, runtime="torch")
    assert pipeplan.to_torch_csv(safe)
    with pytest.raises(pipeplan.InputError, match="give one of --torch-version and --runtime"):
        pipeplan.to_torch_csv(plain, torch_version="2.10", runtime="torch")
