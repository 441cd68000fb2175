"""`export torchtitan` judged by the installed torchtitan (0.3.0, scripts/oracles.txt).

What pipeplan writes for 0.3.0 (DIR/torchtitan.args: CLI overrides, one argv token a
line) is parsed by torchtitan's own ConfigManager (torchtitan/config/manager.py: `--module
llama3 --config llama3_debugmodel` and then the overrides, through tyro, as
`torchtitan.train` does). From that config:

- the model is built as trainer.py builds it (`model_spec.model.update_from_config`, then
  `.build()` under the meta device): llama3's debug model, 6 layers, on no real memory;
- torchtitan's own `_pipeline_module_split` (torchtitan/distributed/pipeline_parallel.py)
  splits it for every pp rank, under torch's fake process group (no processes): each
  stage must hold exactly the modules of the plan's partition, the last one lm_head;
- torchtitan's own `_build_pipeline_schedule` (same file) builds torch's
  `_PipelineScheduleRuntime` and calls its `_load_csv` on pipeplan's schedule.csv, which
  lowers it (`_prepare_schedule_with_comms`); the order it holds is the plan's and its
  stage placement is the one torchtitan built.

0.2.x cannot be installed next to 0.3.0: its TOML is checked against a fixture of that
release's config code (see test_toml_for_0_2_x_uses_the_keys_of_that_release).
"""

import json
import tomllib

import pytest

from oracles import require, run_cli, version_of

TORCHTITAN_VERSION = "0.3.0"  # what pipeplan's default --torchtitan-version writes for
LAYERS = 6  # llama3_debugmodel (torchtitan/models/llama3/__init__.py: _debugmodel)


def llama_profile(tmp_path, head_rename=None):
    """pipeplan's own llama profile at the debug model's shape (its names are the test)."""
    out = tmp_path / ("llama_%s.csv" % (head_rename or "lm_head"))
    run_cli("profile", "--arch", "llama", "--layers", LAYERS, "--hidden", 256, "--heads", 16,
            "--vocab", 2048, "--seq", 64, "--micro-batch", 1, "-o", out)
    if head_rename:
        out.write_text(out.read_text().replace("\nlm_head,", "\n%s," % head_rename))
    return out


def parse_config(args):
    """torchtitan's config, parsed by its own ConfigManager as torchtitan.train does."""
    manager = require("torchtitan.config.manager")
    return manager.ConfigManager().parse_args(
        ["--module", "llama3", "--config", "llama3_debugmodel"] + args)


def build_model(config):
    """The model as torchtitan's Trainer builds it (trainer.py: meta device)."""
    torch = require("torch")
    model_config = config.model_spec.model
    model_config.update_from_config(config=config)
    with torch.device("meta"):
        model = model_config.build()
    # _split_module deep-copies the model and may renumber a ModuleList: tag each block
    # with its FQN so a stage's blocks can be named after the split.
    for name, block in model.layers.named_children():
        block._pipeplan_fqn = "layers." + name
    return model


def stage_modules(chunk):
    """The FQNs a stage's model chunk holds (None children are pruned ones)."""
    names = []
    for name, child in chunk.named_children():
        if child is None:
            continue
        if name == "layers":
            names += [b._pipeplan_fqn for b in child.children()]
        else:
            names.append(name)
    order = {"tok_embeddings": -1, "norm": 1 << 30, "lm_head": 1 << 31}
    return sorted(names, key=lambda n: order.get(n, int(n.split(".")[1]) if "." in n else 0))


def split_every_rank(config, model, build_schedule=True):
    """{stage: (modules, rank)} from torchtitan's split on each pp rank, and per rank the
    schedule torchtitan builds (_PipelineScheduleRuntime with the CSV loaded)."""
    torch = require("torch")
    dist = require("torch.distributed")
    fake_pg = require("torch.testing._internal.distributed.fake_pg")
    mesh_mod = require("torch.distributed.device_mesh")
    tpp = require("torchtitan.distributed.pipeline_parallel")
    par = config.parallelism
    p = par.pipeline_parallel_degree
    stages_seen, schedules = {}, {}
    for rank in range(p):
        dist.init_process_group("fake", rank=rank, world_size=p, store=fake_pg.FakeStore())
        try:
            mesh = mesh_mod.init_device_mesh("cpu", (p,), mesh_dim_names=("pp",))
            stages, parts = tpp._pipeline_module_split(
                model, mesh, par.pipeline_parallel_schedule, torch.device("cpu"),
                par.module_fqns_per_model_part)
            for stage, chunk in zip(stages, parts):
                stages_seen[stage.stage_index] = (stage_modules(chunk), rank)
            if build_schedule:
                schedules[rank] = tpp._build_pipeline_schedule(
                    parallelism=par, local_batch_size=config.training.local_batch_size,
                    stages=stages, loss_fn=lambda *a, **k: (torch.zeros(()), None))
        finally:
            dist.destroy_process_group()
    return stages_seen, schedules


def export(tmp_path, plan, profile, *extra):
    out = tmp_path / "tt"
    run_cli("export", "torchtitan", plan, "--layers", profile, "-o", out, *extra)
    return out


def plan_partition(meta, profile):
    names = [line.split(",")[0] for line in profile.read_text().splitlines()
             if line and not line.startswith("#")][1:]
    parts, at = [], 0
    for count in meta["partition"]:
        parts.append(names[at:at + count])
        at += count
    return parts


def placement(meta):
    stages = meta["pp_degree"] * meta["stages_per_rank"]
    p = meta["pp_degree"]
    if meta["stage_to_rank"] == "v":
        return {s: min(s, stages - 1 - s) for s in range(stages)}
    return {s: s % p for s in range(stages)}


def check_against_torchtitan(tmp_path, plan_path, profile, microbatch_size=2):
    out = export(tmp_path, plan_path, profile, "--microbatch-size", microbatch_size)
    assert not (out / "torchtitan.toml").exists()
    args = (out / "torchtitan.args").read_text().splitlines()
    config = parse_config(args)
    meta = json.loads(plan_path.read_text())
    par = config.parallelism
    assert par.pipeline_parallel_degree == meta["pp_degree"]
    assert par.pipeline_parallel_schedule_csv == str((out / "schedule.csv").resolve())
    assert par.pipeline_parallel_microbatch_size == microbatch_size
    assert config.training.local_batch_size == meta["num_microbatches"] * microbatch_size
    config._validate_cuda_graphs()  # the Trainer's own check; PP needs CUDA graphs off
    want = plan_partition(meta, profile)
    assert par.module_fqns_per_model_part == want

    stages, schedules = split_every_rank(config, build_model(config))
    num_stages = meta["pp_degree"] * meta["stages_per_rank"]
    assert sorted(stages) == list(range(num_stages))
    for s in range(num_stages):
        modules, rank = stages[s]
        assert modules == want[s], "stage %d" % s
        assert rank == placement(meta)[s], "stage %d placed on rank %d" % (s, rank)
    assert "lm_head" in stages[num_stages - 1][0]
    assert all("lm_head" not in stages[s][0] for s in range(num_stages - 1))

    # torch's _load_csv (via torchtitan's _build_pipeline_schedule) holds the plan's order.
    csv_rows = [row.split(",") for row in (out / "schedule.csv").read_text().splitlines()]
    for rank, schedule in schedules.items():
        assert type(schedule).__name__ == "_PipelineScheduleRuntime"
        assert schedule._n_microbatches == meta["num_microbatches"]
        for r, row in enumerate(csv_rows):
            assert [str(a) for a in schedule.pipeline_order[r]] == row
        assert schedule.stage_index_to_group_rank == placement(meta)
        assert schedule.pipeline_order_with_comms  # torch lowered it itself
    return meta


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("interleaved-1f1b", 2), ("zbv", 2),
                                        ("zb-h1", 1), ("interleaved-zb", 2)])
def test_torchtitan_loads_the_export_and_splits_the_plan(tmp_path, schedule, v):
    require("torchtitan")
    assert version_of("torchtitan") == TORCHTITAN_VERSION, (
        "pipeplan writes for torchtitan %s by default; the installed one is %s"
        % (TORCHTITAN_VERSION, version_of("torchtitan")))
    profile = llama_profile(tmp_path)
    plan = tmp_path / "plan.json"
    run_cli("plan", "-s", schedule, "-p", 2, "-m", 4, "-v", v, "--layers", profile, "-o", plan)
    check_against_torchtitan(tmp_path, plan, profile)


def test_torchtitan_loads_a_searched_plan(tmp_path):
    require("torchtitan")
    profile = llama_profile(tmp_path)
    out = tmp_path / "emit"
    run_cli("search", "-p", 2, "-m", 6, "--layers", profile, "--time-limit", 1,
            "-o", tmp_path / "best.json", "--emit", "torchtitan", out)
    args = (out / "torchtitan.args").read_text().splitlines()
    config = parse_config(args)
    meta = json.loads((tmp_path / "best.json").read_text())
    stages, schedules = split_every_rank(config, build_model(config))
    want = plan_partition(meta, profile)
    assert [stages[s][0] for s in sorted(stages)] == want
    assert [stages[s][1] for s in sorted(stages)] == [placement(meta)[s] for s in sorted(stages)]
    for schedule in schedules.values():
        assert schedule.stage_index_to_group_rank == placement(meta)


def test_output_would_silently_drop_lm_head_so_export_refuses_it(tmp_path):
    """torchtitan's split sets every module it is not given to None: with the head named
    `output` (0.2.x's name) every stage would get lm_head = None. pipeplan refuses."""
    require("torchtitan")
    old = llama_profile(tmp_path, head_rename="output")
    plan = tmp_path / "plan.json"
    run_cli("plan", "-s", "1f1b", "-p", 2, "-m", 4, "-o", plan)
    proc = run_cli("export", "torchtitan", plan, "--layers", old, "-o", tmp_path / "no",
                   check=False)
    assert proc.returncode == 2
    assert "'output' is not a module of torchtitan 0.3.0's llama model" in proc.stderr
    assert not (tmp_path / "no").exists()
    # What torchtitan itself would have done with it: no stage holds lm_head.
    good = export(tmp_path, plan, llama_profile(tmp_path))
    args = [line.replace(",lm_head", ",output")
            for line in (good / "torchtitan.args").read_text().splitlines()]
    config = parse_config(args)
    stages, _ = split_every_rank(config, build_model(config), build_schedule=False)
    assert all("lm_head" not in modules for modules, _ in stages.values())
    # A module the profile leaves out is refused too.
    headless = tmp_path / "headless.csv"
    headless.write_text("".join(line + "\n" for line in llama_profile(tmp_path).read_text()
                                .splitlines() if not line.startswith("lm_head,")))
    proc = run_cli("export", "torchtitan", plan, "--layers", headless, "-o", tmp_path / "no",
                   check=False)
    assert proc.returncode == 2 and "leaves out module 'lm_head'" in proc.stderr


# The fields of torchtitan v0.2.2's JobConfig sections export writes, copied from that
# tag's torchtitan/config/job_config.py (commit 73a0e6979dd1, 2026-02-20; v0.2.0 and
# v0.2.1 have the same keys used here). Its config/manager.py loads `--job.config_file`
# with tomllib and _dict_to_dataclass raises "Invalid field names ..." on any other key;
# its llama model (models/llama3/model/model.py) names the head `self.output`.
V0_2_2_FIELDS = {
    "parallelism": {
        "data_parallel_replicate_degree", "data_parallel_shard_degree",
        "fsdp_reshard_after_forward", "tensor_parallel_degree", "disable_loss_parallel",
        "enable_async_tensor_parallel", "pipeline_parallel_degree",
        "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_schedule", "pipeline_parallel_schedule_csv",
        "pipeline_parallel_microbatch_size", "pipeline_parallel_expert_parallel_overlap",
        "context_parallel_degree", "context_parallel_load_balancer",
        "context_parallel_rotate_method", "expert_parallel_degree",
        "expert_tensor_parallel_degree", "expert_parallel_comm_backend"},
    "training": {
        "dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len",
        "max_norm", "steps", "enable_cpu_offload", "dtype", "mixed_precision_param",
        "mixed_precision_reduce", "gc_freq", "gc_debug", "dataloader"},
}


@pytest.mark.parametrize("version", ["0.2.2", "0.2.1", "0.2.0"])
def test_toml_for_0_2_x_uses_the_keys_of_that_release(tmp_path, version):
    old = llama_profile(tmp_path, head_rename="output")
    plan = tmp_path / "plan.json"
    run_cli("plan", "-s", "interleaved-1f1b", "-p", 2, "-m", 4, "-v", 2, "-o", plan)
    out = export(tmp_path, plan, old, "--torchtitan-version", version, "--microbatch-size", 2)
    assert not (out / "torchtitan.args").exists()
    config = tomllib.loads((out / "torchtitan.toml").read_text())
    for section, values in config.items():  # v0.2.2 _dict_to_dataclass's check
        assert set(values) <= V0_2_2_FIELDS[section], section
    par = config["parallelism"]
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert config["training"]["local_batch_size"] == 8
    fqns = par["module_fqns_per_model_part"]
    assert len(fqns) == 4 and fqns[-1][-2:] == ["norm", "output"]
    assert [n for part in fqns for n in part] == (
        ["tok_embeddings"] + ["layers.%d" % i for i in range(LAYERS)] + ["norm", "output"])
    # 0.3.0's head name is refused for 0.2.x.
    proc = run_cli("export", "torchtitan", plan, "--layers", llama_profile(tmp_path), "-o",
                   tmp_path / "no", "--torchtitan-version", version, check=False)
    assert proc.returncode == 2 and "'lm_head' is not a module of torchtitan" in proc.stderr
