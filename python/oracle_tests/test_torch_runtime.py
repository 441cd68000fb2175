"""torch 2.15.0's own runtime runs pipeplan's plans (issue 35, part 2).

Each CSV from pipeplan.to_torch_csv is loaded by the real
`_PipelineScheduleRuntime._load_csv` (torch/distributed/pipelining/
schedules.py) and executed for one step on Gloo with real PipelineStages on a
tiny transformer (torch_pp.py); the loss and every parameter's gradient must
equal the unpipelined model on the same weights (one weights file).
The schedule.csv of `pipeplan export torchtitan` (compute-only) is run the
same way. compute_only files are lowered by torch; compute_comms files run as pipeplan
lowered them (with torch 2.15's WAIT_SEND_*/WAIT_REDUCE_GRAD, see
src/emit/plan_csv.cc). All cases of one world size share one set of ranks.
The same plans (compute_comms) also run on pipeplan's own executor
(tests/exec/exec_transformer.cc: the C++ TransformerEncoderLayer loading the
same weights file): its loss and gradients equal the reference and torch's.
"""

import pytest

from oracles import require, require_executor, run_cli, version_of

import pipeplan

# (schedule, p, m, stages per rank): every schedule torch has, I/W plans
# (zb-h1, interleaved-zb, zbv, dualpipev), V plans (zbv, dualpipev) and
# interleaved plans with m % p != 0.
P2 = [("gpipe", 2, 4, 1), ("1f1b", 2, 3, 1), ("zb-h1", 2, 4, 1),
      ("interleaved-1f1b", 2, 3, 2), ("looped-bfs", 2, 4, 2),
      ("interleaved-zb", 2, 4, 2), ("zbv", 2, 4, 2), ("dualpipev", 2, 4, 2)]
P4 = [("1f1b", 4, 6, 1), ("interleaved-1f1b", 4, 6, 2), ("zbv", 4, 8, 2),
      ("interleaved-zb", 4, 8, 2)]


def cases_of(grid):
    out = []
    for name, p, m, v in grid:
        for fmt in ("compute_only", "compute_comms"):
            plan = pipeplan.plan(name, p, m, stages_per_rank=v, compute_only=(fmt == "compute_only"))
            out.append({"csv": pipeplan.to_torch_csv(plan), "m": m, "format": fmt, "plan": plan,
                        "id": "%s p%d m%d v%d %s" % (name, p, m, v, fmt)})
    return out


@pytest.mark.parametrize("grid", [P2, P4], ids=["p2", "p4"])
def test_torch_runtime_runs_pipeplan_csv(grid):
    require("torch.distributed.pipelining")
    import torch_pp
    cases = cases_of(grid)
    results = torch_pp.run_cases(grid[0][1], cases)
    bad = ["%s: %s" % (c["id"], "; ".join(torch_pp.mismatches(r)[:3]))
           for c, r in zip(cases, results) if torch_pp.mismatches(r)]
    assert not bad, "torch %s ran pipeplan's CSVs differently:\n%s" % (
        version_of("torch"), "\n".join(bad))
    # pipeplan's executor on the same plans, weights and batch.
    require_executor()
    comms = [(c, r) for c, r in zip(cases, results) if c["format"] == "compute_comms"]
    ran = torch_pp.run_executor([{"plan": c["plan"].to_json(), "m": c["m"]} for c, _ in comms])
    bad = []
    for (c, torch_result), mine in zip(comms, ran):
        for what in torch_pp.mismatches(mine)[:3]:
            bad.append("%s: executor vs unpipelined: %s" % (c["id"], what))
        for what in torch_pp.differences(mine, torch_result)[:3]:
            bad.append("%s: executor vs torch's runtime: %s" % (c["id"], what))
    assert not bad, "\n".join(bad)


def export_torchtitan_csv(tmp_path, schedule, p, m, v):
    """The schedule CSV `pipeplan export torchtitan` writes for a library plan."""
    plan_json = tmp_path / ("%s.json" % schedule)
    plan_json.write_text(run_cli("plan", "-s", schedule, "-p", p, "-m", m, "-v", v, "-f", "json").stdout)
    layers = tmp_path / "layers.csv"
    # Named as torchtitan 0.3.0's llama modules (export refuses other names).
    layers.write_text("name,F,B,W,activation\ntok_embeddings,0.1,0.1,0.1,0.1\n" +
                      "".join("layers.%d,1,1,1,1\n" % i for i in range(p * v)) +
                      "norm,0.1,0.1,0.1,0.1\nlm_head,0.1,0.1,0.1,0.1\n")
    out = tmp_path / ("tt_" + schedule)
    run_cli("export", "torchtitan", plan_json, "--layers", layers, "-o", out)
    return (out / "schedule.csv").read_text()


def test_torch_runtime_runs_a_searched_plan_and_export_torchtitan(tmp_path):
    require("torch.distributed.pipelining")
    import torch_pp
    layers = [{"name": "l%d" % i, "F": 1.0, "B": 1.0, "W": 1.0, "activation": 1.0}
              for i in range(8)]
    result = pipeplan.search(layers, 2, 4, time_limit=1.0, max_stages_per_rank=2,
                             recompute=False, offload=False)
    plan = result.plan
    text = pipeplan.to_torch_csv(plan)
    assert "W" in text.replace("WAIT", ""), "the searched plan splits backward (I/W): " + text
    cases = [{"csv": text, "m": 4, "format": "compute_comms"},
             {"csv": export_torchtitan_csv(tmp_path, "zbv", 2, 4, 2), "m": 4,
              "format": "compute_only"},
             {"csv": export_torchtitan_csv(tmp_path, "interleaved-1f1b", 2, 3, 2), "m": 3,
              "format": "compute_only"}]
    results = torch_pp.run_cases(2, cases)
    for c, res in zip(cases, results):
        assert torch_pp.mismatches(res) == [], (result.origin, c["csv"])
    # The searched plan (I/W) on pipeplan's executor: the same step as torch's.
    require_executor()
    mine, = torch_pp.run_executor([{"plan": plan.to_json(), "m": 4}])
    assert torch_pp.mismatches(mine) == [], result.origin
    assert torch_pp.differences(mine, results[0]) == [], result.origin
