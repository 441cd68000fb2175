"""Layer profiles (read_layers, layers=) and search() against `pipeplan search`,
`pipeplan simulate --layers` and `pipeplan compare --layers`."""

import json

import pytest

import pipeplan

ROWS = [("embed", 1, 2, 1, 1), ("mid", 2, 3, 1, 1), ("mid2", 1, 2, 1.5, 2), ("head", 1, 1, 0.5, 1)]


@pytest.fixture(scope="module")
def layers_dir(source_dir):
    return source_dir / "examples" / "layers"


def test_read_layers_from_a_file_and_from_rows(layers_dir):
    from_file = pipeplan.read_layers(layers_dir / "tiny4.csv")
    assert len(from_file) == 4
    from_rows = pipeplan.read_layers([("a", 1, 2, 1, 1), {"name": "b", "F": 2, "B": 3, "W": 1,
                                                          "activation": 1},
                                      ("c", 1, 2, 1.5, 2), ("d", 1, 1, 0.5, 1)])
    assert [l.name for l in from_rows.layers] == ["a", "b", "c", "d"]
    for x, y in zip(from_file.layers, from_rows.layers):
        assert (x.name, x.F, x.B, x.W, x.activation) == (y.name, y.F, y.B, y.W, y.activation)
    assert from_rows[2].I == pytest.approx(0.5)
    assert from_rows.balanced_partition(2) == from_file.balanced_partition(2)


def test_bad_layer_rows_are_located_input_errors():
    with pytest.raises(pipeplan.InputError, match=r"layers\[1\].*W.*exceeds B"):
        pipeplan.read_layers([("a", 1, 2, 1, 1), ("b", 1, 1, 2, 1)])
    with pytest.raises(pipeplan.InputError, match=r"layers\[0\]: expected 5 values"):
        pipeplan.read_layers([("a", 1, 2)])
    with pytest.raises(pipeplan.InputError, match="no layers"):
        pipeplan.read_layers([])
    with pytest.raises(pipeplan.InputError, match="cannot read '/nonexistent/layers.csv'"):
        pipeplan.read_layers("/nonexistent/layers.csv")


def test_simulate_with_layers_matches_the_cli(cli, layers_dir):
    path = layers_dir / "gpt50.csv"
    plan = pipeplan.plan("1f1b", 4, 8)
    r = pipeplan.simulate(plan, layers=path, comm=0.5)
    doc = json.loads(cli.out("simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--layers", path,
                             "--comm", "0.5", "-f", "json"))
    assert r.makespan == pytest.approx(doc["makespan"])
    assert [s.peak_memory for s in r.ranks] == pytest.approx([x["peak_memory"] for x in doc["ranks"]])
    assert r.peak_memory == pytest.approx(max(x["peak_memory"] for x in doc["ranks"]))
    # Without a profile every stage holds 1: peak memory is the activation count.
    plain = pipeplan.simulate(plan)
    assert [s.peak_memory for s in plain.ranks] == [float(s.peak_activations) for s in plain.ranks]


def test_compare_with_layers_matches_the_cli(cli, layers_dir):
    path = layers_dir / "llama35.csv"
    c = pipeplan.compare(4, 8, schedules=["1f1b", "zbv", "interleaved-1f1b"], layers=path)
    doc = json.loads(cli.out("compare", "-p", "4", "-m", "8", "--schedules", "1f1b", "zbv",
                             "interleaved-1f1b", "--layers", path, "-f", "json"))
    by_name = {row["schedule"]: row for row in doc["results"]}
    for row in c:
        assert row.makespan == pytest.approx(by_name[row.schedule]["makespan"])
        assert row.peak_memory == pytest.approx(by_name[row.schedule]["peak_memory"])
        assert row.partition == by_name[row.schedule]["partition"]
        assert sum(row.partition) == 35 and len(row.partition) == 4 * row.stages_per_rank


def test_search_matches_the_cli_and_its_plan_is_verified(cli, layers_dir, tmp_path):
    path = layers_dir / "tiny4.csv"
    r = pipeplan.search(path, 2, 4, comm=0.5, memory_limit=6)
    out = tmp_path / "plan.json"
    doc = json.loads(cli.out("search", "-p", "2", "-m", "4", "--layers", path, "--comm", "0.5",
                             "--memory-limit", "6", "-f", "json", "-o", out))
    assert r.makespan == pytest.approx(doc["makespan"])
    assert r.peak_memory == pytest.approx(doc["peak_memory"])
    assert r.lower_bound == pytest.approx(doc["lower_bound"])
    assert (r.mapping, r.stages_per_rank, r.partition) == (doc["mapping"], doc["stages_per_rank"],
                                                          doc["partition"])
    assert r.peak_memory <= 6 + 1e-9
    assert r.lower_bound <= r.makespan + 1e-9
    if r.best_library is not None:
        assert r.makespan <= r.best_library.makespan + 1e-9
    for t in ("rendezvous", "eager", "serial"):
        assert pipeplan.verify(r.plan, t) == []
    assert r.plan == pipeplan.read(out)
    assert json.loads(r.to_json())["makespan"] == doc["makespan"]
    again = pipeplan.simulate(r.plan, layers=path, comm=0.5)
    assert again.makespan == pytest.approx(r.makespan)


def test_search_without_a_fitting_plan_names_the_smallest_budget():
    with pytest.raises(pipeplan.InputError, match=r"smallest budget that works is [0-9.]+"):
        pipeplan.search(ROWS, 2, 4, memory_limit=0.5)
    with pytest.raises(pipeplan.BudgetError) as caught:
        pipeplan.search(ROWS, 2, 4, memory_limit=0.5)
    assert isinstance(caught.value, pipeplan.InputError)
    assert caught.value.exit_code == 2
    smallest = caught.value.smallest_budget
    assert smallest > 0.5
    r = pipeplan.search(ROWS, 2, 4, memory_limit=smallest)
    assert r.peak_memory <= smallest + 1e-9
    with pytest.raises(pipeplan.InputError, match="fewer than the 8 ranks"):
        pipeplan.search(ROWS, 8, 4)
    with pytest.raises(pipeplan.ShapeError, match="more than the supported"):
        pipeplan.search(ROWS, 2, 1 << 21)


def test_search_charges_a_stated_default_message_cost(cli, layers_dir):
    # Without comm= every message costs 0.25 x the mean layer F, as the CLI's.
    mean_f = sum(row[1] for row in ROWS) / len(ROWS)
    r = pipeplan.search(ROWS, 2, 4, time_limit=0.5)
    assert r.transfer_cost_default
    assert r.transfer_time == pytest.approx(0.25 * mean_f)
    assert "transfer cost: " in r.to_text() and "(default: 0.25 x" in r.to_text()
    free = pipeplan.search(ROWS, 2, 4, comm=0, time_limit=0.5)
    assert not free.transfer_cost_default
    assert free.transfer_time == 0
    path = str(layers_dir / "gpt50.csv")
    doc = json.loads(cli.out("search", "-p", "4", "-m", "8", "--layers", path, "--time-limit",
                             "0.5", "-f", "json"))
    assert doc["transfer_cost"] == "default"
    assert pipeplan.search(path, 4, 8, time_limit=0.5).transfer_time == pytest.approx(
        doc["transfer_time"])
