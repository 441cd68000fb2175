"""Variable-length microbatches (docs/lengths.md): lengths= on plan, simulate,
compare and search, against `pipeplan ... --lengths`."""

import json

import pytest

import pipeplan

PROFILE = ("# seq_len: 1000\nname,F,B,W,activation,F_quad,B_quad,W_quad\n"
           "a,1,2,1,1,0.3,0.6,0\nb,1,2,1,1,0.3,0.6,0\nc,1,2,1,1,0.3,0.6,0\nd,2,4,2,1,0,0,0\n")


@pytest.fixture()
def profile(tmp_path):
    path = tmp_path / "profile.csv"
    path.write_text(PROFILE)
    return path


def test_simulate_times_each_microbatch_at_its_length(cli):
    plan = pipeplan.plan("1f1b", 2, 2)
    r = pipeplan.simulate(plan, lengths=[1, 2])
    assert r.makespan == pytest.approx(7.0)  # by hand in tests/lengths_test.cc
    assert r.ranks[0].peak_memory == pytest.approx(1.5)
    out = json.loads(cli.out("simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", "1,2",
                             "-f", "json"))
    assert out["makespan"] == pytest.approx(r.makespan)
    assert out["costs"]["lengths"] == [1, 2]
    # Equal lengths are the plain simulation.
    assert pipeplan.simulate(plan, lengths=[5, 5]).makespan == pipeplan.simulate(plan).makespan


def test_a_profile_states_its_length_and_quadratic_part(profile, tmp_path):
    layers = pipeplan.read_layers(profile)
    assert layers.seq_len == 1000
    assert layers[0].F_quad == pytest.approx(0.3) and layers[0].B_quad == pytest.approx(0.6)
    plan = pipeplan.plan("1f1b", 2, 2)
    short = pipeplan.simulate(plan, layers=profile, lengths=[500, 500])
    stated = pipeplan.simulate(plan, layers=profile, lengths=[1000, 1000])
    assert stated.makespan == pytest.approx(pipeplan.simulate(plan, layers=profile).makespan)
    # Half the tokens: the linear part halves, the quadratic part quarters.
    assert short.makespan < 0.5 * stated.makespan + 1e-9
    lengths_file = tmp_path / "lengths.txt"
    lengths_file.write_text("500\n500\n")
    assert pipeplan.simulate(plan, layers=profile, lengths=lengths_file).makespan == short.makespan


def test_plan_compare_and_search_take_lengths(cli, profile):
    lengths = [4000, 100, 200, 900]
    p = pipeplan.plan("zbv", 2, 4, lengths=lengths)
    assert p.to_text() == cli.out("plan", "-s", "zbv", "-p", "2", "-m", "4", "--lengths",
                                  "4000,100,200,900", "-f", "text")
    c = pipeplan.compare(2, 4, lengths=lengths, schedules=["1f1b", "gpipe"])
    assert len(c) == 2
    s = pipeplan.search(profile, 2, 4, lengths=lengths, time_limit=1.0)
    assert s.makespan >= s.lower_bound - 1e-9
    uniform = pipeplan.search(profile, 2, 4, time_limit=1.0)
    assert s.makespan != pytest.approx(uniform.makespan)


def test_bad_lengths_are_input_errors():
    plan = pipeplan.plan("1f1b", 2, 2)
    with pytest.raises(pipeplan.InputError, match="3 microbatch lengths given, but the plan has 2"):
        pipeplan.simulate(plan, lengths=[1, 2, 3])
    with pytest.raises(pipeplan.InputError, match="microbatch 1"):
        pipeplan.simulate(plan, lengths=[1, 0])
    with pytest.raises(pipeplan.InputError, match="no microbatch length"):
        pipeplan.simulate(plan, lengths=[])
    with pytest.raises(TypeError, match="lengths must be a list"):
        pipeplan.simulate(plan, lengths=3)
    with pytest.raises(pipeplan.InputError, match="2 microbatch lengths given, but the plan has 3"):
        pipeplan.plan("1f1b", 2, 3, lengths=[1, 2])


def test_plan_step_chooses_schedule_and_order_and_never_loses_to_arrival(profile):
    lengths = [512, 4096, 128, 900, 2048, 64, 700, 300]
    step = pipeplan.plan_step(pp_degree=2, lengths=lengths, layers=profile)
    assert sorted(step.microbatch_order) == list(range(8))
    assert step.lengths == [lengths[k] for k in step.microbatch_order]
    assert step.plan.meta.num_microbatches == 8
    assert pipeplan.verify(step.plan) == []
    arrival = pipeplan.plan_step(pp_degree=2, lengths=lengths, layers=profile, keep_order=True)
    assert arrival.microbatch_order == list(range(8))
    assert step.makespan <= arrival.makespan + 1e-9
    # The plan simulates to the reported makespan at its own lengths.
    again = pipeplan.simulate(step.plan, layers=profile, lengths=step.lengths)
    assert again.makespan == pytest.approx(step.makespan)


def test_plan_step_builds_microbatches_from_sequences(profile):
    sequences = [300, 40, 900, 120, 60, 700, 80, 500, 30, 250, 610, 90, 45, 400, 150, 75]
    step = pipeplan.plan_step(pp_degree=2, sequences=sequences, microbatch_tokens=1000,
                              layers=profile)
    # Every sequence lands in exactly one microbatch, none over the budget.
    placed = sorted(k for mb in step.microbatches for k in mb)
    assert placed == list(range(len(sequences)))
    for mb, tokens in zip(step.microbatches, step.lengths):
        assert sum(sequences[k] for k in mb) == tokens <= 1000
    assert step.first_fit_makespan is not None
    assert step.makespan <= step.first_fit_makespan + 1e-9
    with pytest.raises(pipeplan.InputError, match="more than the microbatch budget"):
        pipeplan.plan_step(pp_degree=2, sequences=[10, 2000], microbatch_tokens=1000)
    with pytest.raises(pipeplan.InputError, match="lengths or sequences, not both"):
        pipeplan.plan_step(pp_degree=2, lengths=[1, 2], sequences=[1], microbatch_tokens=4)
    with pytest.raises(pipeplan.InputError, match="sequences need microbatch_tokens"):
        pipeplan.plan_step(pp_degree=2, sequences=[1, 2])


def test_search_chooses_the_order_and_builds_microbatches(cli, profile, tmp_path):
    lengths = "4000,100,200,900,50,3000"
    out = json.loads(cli.out("search", "--layers", profile, "-p", "2", "-m", "6", "--lengths",
                             lengths, "--time-limit", "1", "-f", "json"))
    assert sorted(out["microbatch_order"]) == list(range(6))
    assert out["lengths"] == [4000, 100, 200, 900, 50, 3000]
    kept = json.loads(cli.out("search", "--layers", profile, "-p", "2", "-m", "6", "--lengths",
                              lengths, "--keep-order", "--time-limit", "1", "-f", "json"))
    assert kept["microbatch_order"] == list(range(6))
    seqs = tmp_path / "seqs.txt"
    seqs.write_text("300 40 900 120 60 700 80 500 30 250 610 90 45 400 150 75\n")
    packed = json.loads(cli.out("search", "--layers", profile, "-p", "2", "--sequences", seqs,
                                "--microbatch-tokens", "1000", "--memory-limit", "1e9",
                                "--time-limit", "1", "-f", "json"))
    assert sorted(k for mb in packed["microbatches"] for k in mb) == list(range(16))
    assert packed["makespan"] <= packed["first_fit_makespan"] + 1e-9
    _, message = cli.error("search", "--layers", profile, "-p", "2", "--sequences", seqs)
    assert "--microbatch-tokens" in message
    _, message = cli.error("search", "--layers", profile, "-p", "2")
    assert "--microbatches is required" in message
