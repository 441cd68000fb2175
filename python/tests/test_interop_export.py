"""torchtitan and Megatron-LM out: the exported files read back the way the
trainers read them.

The CSV reader below restates torch 2.11's rules for
`PipelineScheduleMulti._load_csv` (csv.reader rows, rank = row index,
`_Action.from_str` on every cell, then `_validate_schedule`); the layout
reader restates Megatron-LM's `PipelineParallelLayerLayout.parse_str_to_list`
and `validate_layer_layout`. Where torch is installed, torch's own
`_Action.from_str` and `_validate_schedule` read the CSV too.
"""

import csv
import io
import re
import tomllib

import pytest

# ------------------------------------------------- torch 2.11 _load_csv rules

_ACTION = re.compile(r"(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)")


def torch_from_str(cell):
    """_Action.from_str: strip; "" is None; "(a;b)OVERLAP_F_B" groups; else the
    regex matched at the start (torch uses .match, not .fullmatch)."""
    cell = cell.strip()
    if cell == "":
        return None
    if cell.startswith("(") and ")" in cell:
        end = cell.find(")")
        subs = tuple(torch_from_str(p) for p in cell[1:end].split(";") if p.strip())
        assert cell[end + 1:] == "OVERLAP_F_B", cell
        return (-1, "OVERLAP_F_B", None, subs)
    m = _ACTION.match(cell)
    assert m, f"Invalid action string: {cell}"
    stage, kind, mb = m.groups()
    return (int(stage), kind, int(mb) if mb else None, None)


def torch_load_csv(text, pp, num_stages, m):
    """Rows as torch reads them, then _validate_schedule's checks; returns
    (pipeline_order, stage_to_rank)."""
    order = {rank: [torch_from_str(s) for s in row]
             for rank, row in enumerate(csv.reader(io.StringIO(text, newline="")))}
    assert sorted(order) == list(range(pp)), "Schedule is missing actions for a rank"
    seen = {s: {"F": set(), "B": set(), "I": set(), "W": set()} for s in range(num_stages)}
    stage_to_rank = {}

    def process(action, rank):
        s, kind, mb, _ = action
        if kind == "F":
            seen[s]["F"].add(mb)
        elif kind in ("B", "I"):
            assert mb in seen[s]["F"], f"{kind} of stage {s} mb {mb} before its forward"
            seen[s][kind].add(mb)
        elif kind == "W":
            assert mb in seen[s]["I"], f"W of stage {s} mb {mb} before its I"
            seen[s]["W"].add(mb)
        assert stage_to_rank.setdefault(s, rank) == rank, f"stage {s} on two ranks"

    for rank, actions in order.items():
        for a in actions:
            if a is None:
                continue
            for sub in (a[3] if a[3] is not None else (a,)):
                process(sub, rank)
    for s, kinds in seen.items():
        assert len(kinds["F"]) == m, f"stage {s}: {len(kinds['F'])} F"
        assert len(kinds["I"]) == len(kinds["W"])
        assert len(kinds["B"]) + (len(kinds["I"]) + len(kinds["W"])) // 2 == m
    return order, stage_to_rank


# -------------------------------------------- Megatron-LM layout parser rules

def megatron_parse(layout):
    """parse_str_to_list: commas dropped, "(..)*n" then "x*n" unrolled, '|' splits."""
    layout = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        layout = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), layout)
    kinds = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
    return [[kinds[c] for c in stage] for stage in layout.split("|")]


def megatron_validate(stages, pp, num_layers):
    assert len(stages) % pp == 0
    flat = [x for s in stages for x in s]
    assert flat[0] == "embedding" and flat[-1] == "loss"
    assert flat.count("embedding") == 1 and flat.count("loss") == 1
    assert flat.count("decoder") == num_layers
    # Stage k of the flat list is (vpp k // pp, pp rank k % pp).
    return {k: k % pp for k in range(len(stages))}


# ------------------------------------------------------------------- fixtures

def profile_csv(tmp_path, layers=8, head="lm_head"):
    """A llama profile named as torchtitan 0.3.0's modules (head "output" for 0.2.x)."""
    rows = ["name,F,B,W,activation", "tok_embeddings,0.2,0.4,0.4,0.1"]
    rows += [f"layers.{i},1,2,1,1" for i in range(layers)]
    rows += ["norm,0.05,0.1,0,0.05", f"{head},2,4,2,1.5"]
    path = tmp_path / "model.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def read_plan(cli, path):
    import json
    return json.loads(path.read_text())


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("interleaved-1f1b", 2), ("zbv", 2),
                                        ("zb-h1", 1)])
def test_torchtitan_export_reads_back_as_torch_and_tomllib_read_it(cli, tmp_path, schedule, v):
    layers = profile_csv(tmp_path, head="output")
    plan = tmp_path / "plan.json"
    cli.out("plan", "-s", schedule, "-p", "2", "-m", "4", "-v", v, "--layers", layers, "-o", plan)
    out = tmp_path / "tt"
    cli.out("export", "torchtitan", plan, "--layers", layers, "-o", out, "--microbatch-size", 2,
            "--torchtitan-version", "0.2.2")
    meta = read_plan(cli, plan)
    stages = 2 * v
    text = (out / "schedule.csv").read_text()
    order, stage_to_rank = torch_load_csv(text, 2, stages, 4)
    # Every compute action of the plan, in order, and nothing else.
    for entry in meta["ranks"]:
        want = [a for a in entry["actions"] if "SEND" not in a and "RECV" not in a]
        got = [str(a[0]) + a[1] + str(a[2]) if a[3] is None else None
               for a in order[entry["rank"]]]
        assert got == want
    config = tomllib.loads((out / "torchtitan.toml").read_text())
    par = config["parallelism"]
    assert par["pipeline_parallel_degree"] == 2
    assert par["pipeline_parallel_schedule_csv"] == str((out / "schedule.csv").resolve())
    assert par["pipeline_parallel_microbatch_size"] == 2
    assert config["training"]["local_batch_size"] == 8  # 4 microbatches of 2
    fqns = par["module_fqns_per_model_part"]
    assert len(fqns) == stages
    assert [n for part in fqns for n in part] == (
        ["tok_embeddings"] + [f"layers.{i}" for i in range(8)] + ["norm", "output"])
    torch_names = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "zbv": "ZBVZeroBubble",
                   "zb-h1": "1F1B"}  # not torch's: the loop placement
    assert par["pipeline_parallel_schedule"] == torch_names[schedule]
    # torchtitan places stages "v" only for V schedules: the CSV must agree.
    if meta["stage_to_rank"] == "v":
        assert stage_to_rank == {s: min(s, stages - 1 - s) for s in range(stages)}
    else:
        assert stage_to_rank == {s: s % 2 for s in range(stages)}


def test_torchtitan_csv_reads_with_torch_itself(cli, tmp_path):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    layers = profile_csv(tmp_path)
    plan = tmp_path / "plan.json"
    cli.out("plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2", "-o", plan)
    cli.out("export", "torchtitan", plan, "--layers", layers, "-o", tmp_path / "tt")
    with open(tmp_path / "tt" / "schedule.csv", newline="") as f:
        order = {r: [schedules._Action.from_str(s) for s in row]
                 for r, row in enumerate(csv.reader(f))}
    schedules._validate_schedule(order, 2, 4, 4)


def test_searched_plan_emits_torchtitan(cli, tmp_path):
    layers = profile_csv(tmp_path)
    out = tmp_path / "emit"
    cli.out("search", "-p", "2", "-m", "4", "--layers", layers, "--time-limit", "1",
            "-o", tmp_path / "best.json", "--emit", "torchtitan", out)
    meta = read_plan(cli, tmp_path / "best.json")
    stages = meta["pp_degree"] * meta["stages_per_rank"]
    torch_load_csv((out / "schedule.csv").read_text(), 2, stages, 4)
    args = (out / "torchtitan.args").read_text().splitlines()
    at = args.index("--parallelism.module_fqns_per_model_part")
    parts = [line.split(",") for line in args[at + 1:at + 1 + stages]]
    assert [len(p) for p in parts] == meta["partition"]
    assert parts[-1][-1] == "lm_head"


def test_torchtitan_refuses_names_that_are_not_the_release_modules(cli, tmp_path):
    plan = tmp_path / "plan.json"
    cli.out("plan", "-s", "1f1b", "-p", "2", "-m", "4", "-o", plan)
    old = profile_csv(tmp_path, head="output")
    code, message = cli.error("export", "torchtitan", plan, "--layers", old, "-o", tmp_path / "a")
    assert code == 2 and "'output' is not a module of torchtitan 0.3.0's llama model" in message
    assert not (tmp_path / "a").exists()
    code, message = cli.error("search", "-p", "2", "-m", "4", "--layers", old, "--time-limit", "1",
                              "--emit", "torchtitan", tmp_path / "b")
    assert code == 2 and "calls the output projection lm_head" in message
    assert not (tmp_path / "b").exists()
    code, message = cli.error("export", "torchtitan", plan, "--layers", old, "-o", tmp_path / "c",
                              "--torchtitan-version", "0.4.0")
    assert code == 2 and "unknown torchtitan version '0.4.0'" in message


def test_megatron_layout_round_trips_through_search(cli, tmp_path):
    layers = profile_csv(tmp_path)
    plan = tmp_path / "plan.json"
    cli.out("plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2", "-o", plan)
    layout = cli.out("export", "megatron", plan, "--layers", layers, "-f", "layout").strip()
    stages = megatron_parse(layout)
    megatron_validate(stages, 2, 8)
    # E and L take the embedding and the head group (norm, output).
    sizes = [sum(2 if k == "loss" else 1 for k in s) for s in stages]
    assert sum(sizes) == 11 and len(sizes) == 4
    args = cli.out("export", "megatron", plan, "--layers", layers)
    assert f'--pipeline-model-parallel-layout "{layout}"' in args
    assert "--pipeline-model-parallel-size 2" in args and "--num-layers 8" in args
    # The layout back in as the fixed partition.
    back = tmp_path / "back.json"
    cli.out("search", "-p", "2", "-m", "4", "--layers", layers, "--layout", layout,
            "--time-limit", "1", "-o", back)
    assert read_plan(cli, back)["partition"] == sizes
    # A pasted argument line works too.
    cli.out("search", "-p", "2", "-m", "4", "--layers", layers, "--layout", args,
            "--time-limit", "1", "-o", back)
    assert read_plan(cli, back)["partition"] == sizes


def test_megatron_refuses_what_it_cannot_run(cli, tmp_path):
    layers = profile_csv(tmp_path)
    for schedule, v, what in [("zbv", 2, "V placement"), ("zb-h1", 1, "splits the backward")]:
        plan = tmp_path / f"{schedule}.json"
        cli.out("plan", "-s", schedule, "-p", "2", "-m", "4", "-v", v, "-o", plan)
        code, message = cli.error("export", "megatron", plan, "--layers", layers)
        assert code == 2 and what in message
    code, message = cli.error("search", "-p", "2", "-m", "4", "--layers", layers,
                              "--layout", "Et*3|t*4L")
    assert code == 2 and "holds 7 't' layers, but the profile has 8 transformer layers" in message


def test_torchtitan_export_writes_for_a_torch_release(cli, tmp_path):
    """--torch-version (default: the torch torchtitan 0.3.0's release pins, 2.14.0,
    its .github/workflows/validate_rc.yaml) refuses what that torch cannot read."""
    layers = profile_csv(tmp_path)
    plan = tmp_path / "plan.json"
    cli.out("plan", "-s", "dualpipev", "-p", "2", "-m", "4", "--layers", layers, "-o", plan)
    r = cli.run("export", "torchtitan", plan, "--layers", layers, "-o", tmp_path / "tt")
    assert r.returncode == 0, r.stderr
    assert "(torchtitan 0.3.0, torch 2.14)" in r.stderr
    assert "OVERLAP_F_B" in (tmp_path / "tt" / "schedule.csv").read_text()
    # OVERLAP_F_B arrived in torch 2.9.0's _ComputationType.
    code, message = cli.error("export", "torchtitan", plan, "--layers", layers,
                              "-o", tmp_path / "old", "--torch-version", "2.8")
    assert code == 2
    assert message == ("torch 2.8's runtime has no OVERLAP_F_B, and the plan holds "
                       "(0F3;3B1)OVERLAP_F_B (rank 0 index 7); torch has OVERLAP_F_B from 2.9 on")
    assert not (tmp_path / "old").exists()
    # A split backward (I/W): torch loads a CSV without its torch.compile guard.
    assert "do not compile the stages" in r.stderr
    code, message = cli.error("search", "-p", "2", "-m", "4", "--layers", layers,
                              "--time-limit", "1", "--torch-version", "2.11")
    assert code == 2 and message == "--torch-version goes with --emit torchtitan DIR"
    code, message = cli.error("search", "-p", "2", "-m", "4", "--layers", layers,
                              "--time-limit", "1", "--emit", "torchtitan", tmp_path / "s",
                              "--torch-version", "1.13")
    assert code == 2 and "pipeplan knows torch 2.x runtimes" in message
    assert not (tmp_path / "s").exists()
    cli.out("search", "-p", "2", "-m", "4", "--layers", layers, "--time-limit", "1",
            "--emit", "torchtitan", tmp_path / "s", "--torch-version", "2.12")
    assert (tmp_path / "s" / "schedule.csv").exists()
