"""Memory policies and the search deciding memory from Python (docs/memory.md):
recompute=, offload=, offload_lead=, host_bw=, host_latency= on plan(),
lower(), simulate(), compare() and search(), against the CLI's --recompute,
--offload, --offload-lead, --host-bw, --host-latency, --no-recompute and
--no-offload."""

import json

import pytest

import pipeplan


def cells(plan):
    return [line.split(": ", 1)[1] for line in plan.to_text().splitlines()]


@pytest.fixture(scope="module")
def gpt50(source_dir):
    return source_dir / "examples" / "layers" / "gpt50.csv"


def test_plan_with_recompute_is_the_clis(cli):
    p = pipeplan.plan("1f1b", 2, 3, recompute="all", compute_only=True)
    assert cells(p) == [
        "0F0 0F1 0RECOMPUTE0 0B0 0F2 0RECOMPUTE1 0B1 0RECOMPUTE2 0B2",
        "1F0 1RECOMPUTE0 1B0 1F1 1RECOMPUTE1 1B1 1F2 1RECOMPUTE2 1B2",
    ]
    for kwargs, args in [
        (dict(recompute="all"), ["--recompute", "all"]),
        (dict(recompute=[0]), ["--recompute", "0"]),
        (dict(offload="all", offload_lead=0), ["--offload", "all", "--offload-lead", "0"]),
        (dict(recompute="1", offload="0"), ["--recompute", "1", "--offload", "0"]),
    ]:
        ours = pipeplan.plan("1f1b", 2, 3, **kwargs)
        theirs = pipeplan.loads(cli.out("plan", "-s", "1f1b", "-p", "2", "-m", "3", "-f", "json",
                                        *args))
        assert ours == theirs, kwargs
        assert ours.has_memory_actions
        for t in ("rendezvous", "eager", "serial"):
            assert pipeplan.verify(ours, t) == []
    # One rank of the whole plan, as --rank.
    whole = pipeplan.plan("interleaved-1f1b", 2, 4, recompute="all")
    one = pipeplan.plan("interleaved-1f1b", 2, 4, rank=1, recompute="all")
    assert one.ranks == [whole.ranks[1]]


def test_lower_and_simulate_apply_the_policy_first(cli, tmp_path, gpt50):
    compute = pipeplan.plan("zbv", 2, 4, compute_only=True)
    lowered = pipeplan.lower(compute, offload="all", offload_lead=2)
    path = tmp_path / "zbv.json"
    path.write_text(compute.to_json())
    assert lowered == pipeplan.loads(cli.out("lower", path, "-f", "json", "--offload", "all",
                                             "--offload-lead", "2"))
    assert lowered == pipeplan.plan("zbv", 2, 4, offload="all", offload_lead=2)
    # simulate(): the policy into the given plan, then --lower, with the copy stream.
    plan = pipeplan.plan("1f1b", 4, 8, compute_only=True)
    path = tmp_path / "1f1b.json"
    path.write_text(plan.to_json())
    r = pipeplan.simulate(plan, lower=True, layers=gpt50, offload="all", host_bw=1,
                          host_latency=0.5)
    doc = json.loads(cli.out("simulate", path, "--lower", "--layers", gpt50, "--offload", "all",
                             "--host-bw", "1", "--host-latency", "0.5", "-f", "json"))
    assert r.makespan == pytest.approx(doc["makespan"])
    assert [s.peak_memory for s in r.ranks] == pytest.approx([x["peak_memory"] for x in doc["ranks"]])
    assert [s.peak_host_memory for s in r.ranks] == pytest.approx(
        [x["peak_host_memory"] for x in doc["ranks"]])
    assert [s.copy_busy for s in r.ranks] == pytest.approx([x["copy_busy"] for x in doc["ranks"]])
    assert all(s.copy_busy > 0 for s in r.ranks)
    assert r.plan.has_memory_actions and not plan.has_memory_actions
    # Full recompute on 1F1B p=4 m=8: each rank holds the inputs of its
    # in-flight microbatches (4, 3, 2, 1) plus one activation (unit sizes: 1 each).
    full = pipeplan.simulate(pipeplan.plan("1f1b", 4, 8, recompute="all"))
    kept = pipeplan.simulate(pipeplan.plan("1f1b", 4, 8))
    assert [s.peak_memory for s in kept.ranks] == [4, 3, 2, 1]
    assert [s.peak_memory for s in full.ranks] == [5, 4, 3, 2]


def test_compare_with_a_policy_is_the_clis(cli, gpt50):
    c = pipeplan.compare(4, 8, schedules=["1f1b", "interleaved-1f1b"], layers=gpt50,
                         recompute="all")
    doc = json.loads(cli.out("compare", "-p", "4", "-m", "8", "--schedules", "1f1b",
                             "interleaved-1f1b", "--layers", gpt50, "--recompute", "all",
                             "-f", "json"))
    by_name = {row["schedule"]: row for row in doc["results"]}
    plain = pipeplan.compare(4, 8, schedules=["1f1b", "interleaved-1f1b"], layers=gpt50)
    for row in c:
        assert row.makespan == pytest.approx(by_name[row.schedule]["makespan"])
        assert row.peak_memory == pytest.approx(by_name[row.schedule]["peak_memory"])
        assert row.peak_memory < plain[row.schedule].peak_memory
        assert row.makespan > plain[row.schedule].makespan


def test_policy_misuse_is_the_clis_input_error(cli):
    with pytest.raises(pipeplan.InputError,
                       match="offload_lead places the RELOADs of offload: give offload too"):
        pipeplan.plan("1f1b", 2, 3, offload_lead=2)
    code, message = cli.error("plan", "-s", "1f1b", "-p", "2", "-m", "3", "--offload-lead", "2")
    assert code == 2 and "--offload-lead places the RELOADs of --offload" in message
    with pytest.raises(pipeplan.InputError, match="recompute '0,x'"):
        pipeplan.plan("1f1b", 2, 3, recompute="0,x")
    with pytest.raises(pipeplan.InputError, match="names stage 5, but the plan has 2 stages"):
        pipeplan.plan("1f1b", 2, 3, recompute=[5])
    with pytest.raises(pipeplan.InputError, match="offload_lead must be in 0"):
        pipeplan.plan("1f1b", 2, 3, offload="all", offload_lead=-1)
    with pytest.raises(pipeplan.InputError, match="forward-only plan keeps no activations"):
        pipeplan.plan("1f1b", 2, 3, forward_only=True, recompute="all")
    with pytest.raises(TypeError, match="recompute must be 'all'"):
        pipeplan.plan("1f1b", 2, 3, recompute=True)
    with pytest.raises(pipeplan.InputError, match=r"recompute \[\]: name a stage"):
        pipeplan.plan("1f1b", 2, 3, recompute=[])
    with pytest.raises(pipeplan.InputError, match="already holds memory actions"):
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 3, recompute="all"), recompute="all")
    with pytest.raises(pipeplan.InputError, match="host_bw must be positive"):
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 3), host_bw=0)
    with pytest.raises(pipeplan.InputError, match="host_latency"):
        pipeplan.simulate(pipeplan.plan("1f1b", 2, 3), host_latency=-1)


def test_search_decides_memory_as_the_cli(cli, gpt50):
    # A quarter of 1F1B's budget on gpt50 (p=4, m=8): only recompute fits.
    full = pipeplan.search(gpt50, 4, 8, time_limit=60).memory_limit
    budget = full / 4
    r = pipeplan.search(gpt50, 4, 8, memory_limit=budget, time_limit=60)
    doc = json.loads(cli.out("search", "-p", "4", "-m", "8", "--layers", gpt50, "--memory-limit",
                             repr(budget), "--time-limit", "60", "-f", "json"))
    assert r.makespan == pytest.approx(doc["makespan"])
    assert (r.recomputed, r.offloaded) == (doc["recomputed"], doc["offloaded"])
    assert r.recomputed > 0 and r.offloaded == 0  # no host_bw: no offload
    assert r.peak_memory <= budget + 1e-9
    assert r.lower_bound <= r.makespan + 1e-9
    assert r.plan.has_memory_actions
    for t in ("rendezvous", "eager", "serial"):
        assert pipeplan.verify(r.plan, t) == []
    if r.best_library_recompute is not None:
        assert r.makespan < r.best_library_recompute.makespan
        assert r.best_library_recompute.fits
    assert len(r.library_recompute) == len(doc["library_recompute"])
    with pytest.raises(pipeplan.BudgetError):
        pipeplan.search(gpt50, 4, 8, memory_limit=budget, time_limit=60, recompute=False)
    code, _ = cli.error("search", "-p", "4", "-m", "8", "--layers", gpt50, "--memory-limit",
                        repr(budget), "--no-recompute", "--time-limit", "60")
    assert code == 2
    # With a copy stream the search may offload; forbidding it gives none.
    half = full / 2
    off = pipeplan.search(gpt50, 4, 8, memory_limit=half, time_limit=60, host_bw=1)
    doc = json.loads(cli.out("search", "-p", "4", "-m", "8", "--layers", gpt50, "--memory-limit",
                             repr(half), "--host-bw", "1", "--time-limit", "60", "-f", "json"))
    assert off.makespan == pytest.approx(doc["makespan"])
    assert off.offloaded == doc["offloaded"]
    assert off.peak_memory <= half + 1e-9
    assert pipeplan.verify(off.plan, "serial") == []
    none = pipeplan.search(gpt50, 4, 8, memory_limit=half, time_limit=60, host_bw=1,
                           offload=False)
    assert none.offloaded == 0
    assert off.makespan <= none.makespan + 1e-9
    with pytest.raises(pipeplan.InputError, match="host_bw '-1.0' is not a non-negative number"):
        pipeplan.search(gpt50, 4, 8, host_bw=-1)


def test_layer_profile_columns_for_memory(tmp_path):
    path = tmp_path / "layers.csv"
    path.write_text("name,F,B,W,activation,input,recompute\na,1,2,1,4,0.5,1.5\nb,1,2,1,2,2,1\n")
    prof = pipeplan.read_layers(path)
    assert (prof[0].input, prof[0].recompute) == (0.5, 1.5)
    plain = pipeplan.read_layers([("a", 1, 2, 1, 4)])
    assert (plain[0].input, plain[0].recompute) == (4, 1)  # defaults: activation, F
