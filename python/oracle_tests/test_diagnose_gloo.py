"""`pipeplan diagnose` on real Flight Recorder dumps (issue 36 part 6, hang replay).

The installed torch (2.15.0, scripts/oracles.txt) runs a plan's SEND/RECV over
real Gloo, two processes, with its Flight Recorder on (fr_gloo_run.py says how:
torch's own FlightRecorderHook over a backend that hands every op to
ProcessGroupGloo), and dumps each rank's trace with
torch._C._distributed_c10d._dump_fr_trace. pipeplan must then name, from those
bytes alone, each rank's first unmatched action and the cycle; and report a run
that completed as completed. torch's own reader
(torch.distributed.flight_recorder.components.loader.read_dump) loads the same
files, so they are the real format.
"""

import json
import pathlib

import pytest

from oracles import SOURCE_DIR, require, run_cli, version_of

torch = require("torch")
import fr_gloo_run  # noqa: E402 (after the torch check)

PLANS = SOURCE_DIR / "tests" / "diagnose"


def run_plan(tmp_path, name):
    plan = PLANS / ("%s.csv" % name)
    dumps = fr_gloo_run.run(str(plan), str(tmp_path / name), prefix="rank", timeout=2.0)
    return plan, dumps


def test_dumps_are_what_torchs_loader_reads(tmp_path):
    from torch.distributed.flight_recorder.components.loader import read_dump
    _, dumps = run_plan(tmp_path, "hang")
    for rank, path in enumerate(dumps):
        d = read_dump("rank", path)
        assert d["rank"] == rank
        assert [e["profiling_name"] for e in d["entries"]] == [
            ["gloo_hooked:recv 0<-1"], ["gloo_hooked:recv 1<-0"]][rank]


def test_a_gloo_run_that_hangs_names_both_ranks_and_the_cycle(tmp_path):
    assert version_of("torch").startswith("2.15")
    plan, dumps = run_plan(tmp_path, "hang")
    r = run_cli("diagnose", plan, *dumps, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first unmatched: 0RECV_B0 (step 1, index 1)" in r.stdout
    assert "first unmatched: 1RECV_F0 (step 1, index 0)" in r.stdout
    assert r.stdout.strip().endswith(
        "hang: 2 of 2 ranks waiting (0, 1); waiting chain: rank 0 (at 0RECV_B0) -> "
        "rank 1 (at 1RECV_F0) -> rank 0 [cycle]")
    j = json.loads(run_cli("diagnose", plan, *dumps, "-f", "json", check=False).stdout)
    assert j["completed"] is False and j["cycle"] == [0, 1]
    assert [x["first_unmatched"]["action"] for x in j["ranks"]] == ["0RECV_B0", "1RECV_F0"]
    assert [x["waits_for"] for x in j["ranks"]] == [1, 0]
    # Without rank 1's dump the chain ends at the rank nobody heard from.
    one = run_cli("diagnose", plan, dumps[0], check=False)
    assert one.returncode == 1
    assert "waiting chain: rank 0 (at 0RECV_B0) -> rank 1 (no record)" in one.stdout


def test_a_gloo_run_that_completes_is_reported_complete(tmp_path):
    plan, dumps = run_plan(tmp_path, "ok")
    r = run_cli("diagnose", plan, *dumps, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "completed: every rank finished 1 step(s) of the plan" in r.stdout
    assert "last completed:  1SEND_B0 (step 1, index 3)" in r.stdout
    # The hang's plan does not match this run's dumps: the first differing op is named.
    bad = run_cli("diagnose", PLANS / "hang.csv", *dumps, check=False)
    assert bad.returncode == 2
    assert "P2P op 0 of rank 0 (gloo_hooked:send 0->1" in bad.stderr
