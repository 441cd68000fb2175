"""Megatron-Core as the oracle of `export megatron` and `search --layout`.

Megatron's own code, imported from the installed megatron-core (0.16.1 in
scripts/oracles.txt), judges what pipeplan writes and reads:

- the layout: `TransformerConfig(...)` built with the exported
  `--pipeline-model-parallel-size`, `--pipeline-model-parallel-layout`,
  `--num-layers` and `--mtp-num-layers` (its __post_init__ runs
  `PipelineParallelLayerLayout.from_str` and `validate_layer_layout`,
  megatron/core/transformer/transformer_config.py and
  pipeline_parallel_layer_layout.py); nothing distributed is initialised;
- the interleaved microbatch rule: it lives inside
  `forward_backward_pipelining_with_interleaving`
  (megatron/core/pipeline_parallel/schedules.py), after process groups and a
  CUDA tensor are made, so the test takes the function's own statements that
  check `config.microbatch_group_size_per_vp_stage` against
  `num_microbatches` (from its source, with `ast`) and runs them on a real
  `ModelParallelConfig` (whose __post_init__ defaults the group size to p).

pipeplan must accept exactly what they accept and refuse (exit 2, a message
naming the rule) what they refuse. pipeplan's own rules on top (documented in
docs/megatron.md): every stage holds at least one profile layer, and a group
of profile layers that is one Megatron layer (E, L, the final norm of the MTP
order) stays in one stage.
"""

import ast
import inspect
import itertools
import json
import random
import re
import textwrap
import warnings

import pytest

from oracles import require, run_cli, version_of

HIDDEN = dict(hidden_size=64, num_attention_heads=4)


@pytest.fixture(scope="module")
def megatron():
    require("torch")
    require("megatron.core")
    warnings.simplefilter("ignore")
    import torch
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules
    from megatron.core.transformer.pipeline_parallel_layer_layout import (
        PipelineParallelLayerLayout,
    )
    from megatron.core.transformer.transformer_config import TransformerConfig

    class Megatron:
        version = version_of("megatron-core")

        @staticmethod
        def layout_verdict(layout, p, num_layers, mtp):
            """None when TransformerConfig accepts the layout, else the error."""
            try:
                TransformerConfig(num_layers=num_layers, pipeline_model_parallel_size=p,
                                  pipeline_dtype=torch.float32,
                                  pipeline_model_parallel_layout=layout,
                                  mtp_num_layers=mtp or None, **HIDDEN)
            except (AssertionError, ValueError, NotImplementedError, IndexError) as e:
                # IndexError: an empty layout ("", "|": flatten_layout[0])
                return "%s: %s" % (type(e).__name__, e)
            return None

        @staticmethod
        def placement(layout, p):
            """PipelineParallelLayerLayout's [pp_rank][vpp_rank] lists of layer type names."""
            parsed = PipelineParallelLayerLayout(layout, p)
            return [[[t.name for t in stage] for stage in row] for row in parsed.layout]

        interleaved_check = staticmethod(interleaved_check_of(schedules, ModelParallelConfig,
                                                              torch))
    print("oracle: megatron-core", Megatron.version)
    return Megatron


def interleaved_check_of(schedules, ModelParallelConfig, torch):
    """The microbatch checks of forward_backward_pipelining_with_interleaving,
    taken from its source and run alone: f(p, v, m) -> None or the error."""
    source = textwrap.dedent(inspect.getsource(
        schedules.forward_backward_pipelining_with_interleaving))
    body = ast.parse(source).body[0].body
    text = [ast.get_source_segment(source, node) for node in body]
    first = next(i for i, t in enumerate(text)
                 if "microbatch_group_size_per_vp_stage > num_microbatches" in t)
    last = next(i for i, t in enumerate(text)
                if "final_microbatch_group_size < pipeline_parallel_size" in t)
    assert first < last <= first + 3, text[first:last + 1]
    code = compile(ast.Module(body=body[first:last + 1], type_ignores=[]), "<schedules.py>",
                   "exec")

    def check(p, v, m):
        config = ModelParallelConfig(pipeline_model_parallel_size=p,
                                     virtual_pipeline_model_parallel_size=v,
                                     pipeline_dtype=torch.float32)
        try:
            exec(code, {"config": config, "num_microbatches": m, "pipeline_parallel_size": p})
        except (ValueError, RuntimeError) as e:
            return "%s: %s" % (type(e).__name__, e)
        return None
    return check


# --------------------------------------------------------------------- models

def write_profile(tmp_path, name, blocks=8, mtp=0, embedding=True, head=True):
    """A profile in Megatron's module order: embedding, layers.*, norm, mtp.*, output."""
    rows = ["name,F,B,W,activation"]
    if embedding:
        rows.append("embedding,0.2,0.4,0.4,0.1")
    rows += ["layers.%d,1,2,1,1" % i for i in range(blocks)]
    if head:
        rows.append("norm,0.05,0.1,0,0.05")
    rows += ["mtp.%d,1,2,1,1" % i for i in range(mtp)]
    if head:
        rows.append("output,2,4,2,1.5")
    path = tmp_path / (name + ".csv")
    path.write_text("\n".join(rows) + "\n")
    return path


def stage_sizes(placement, p, blocks, mtp, embedding=True, head=True):
    """Profile layers per stage (stage k = virtual stage k // p of rank k % p)
    of Megatron's placement: E and L take their groups, the norm rides with
    the last decoder layer when there is MTP, else with L."""
    e_layers = 1 if embedding else 0
    l_layers = (1 if mtp else 2) if head else 0
    norm_with_t = 1 if (head and mtp) else 0
    v = len(placement[0])
    sizes, decoders = [], 0
    for k in range(p * v):
        n = 0
        for t in placement[k % p][k // p]:
            if t == "embedding":
                n += e_layers
            elif t == "loss":
                n += l_layers
            else:
                n += 1
                if t == "decoder":
                    decoders += 1
                    n += norm_with_t if decoders == blocks else 0
        sizes.append(n)
    return sizes


# ------------------------------------------------------------ search --layout

LAYOUTS_8 = [
    "Et*8L", "Et*4|t*4L", "Et*2|t*3|t*3|L", "E|t*4|t*4|L", "Et*3|(tt|)*2,tL", "(Et|)t*6|tL",
    "Et*2|t*2|t*2|t*2L", "Et*4|t*4|L|", "E,t,t,t,t|t,t,t,t,L", "Et*04|t*4L",
    # bad for Megatron
    "t*8|EL", "Et*8", "Et*7L", "Et*9L", "EEt*8L", "Et*8LL", "Et*4|t*4 L", "Et*4|t*4l",
    "Et*4|t*4|L", "Et*4|mt*4L", "Et*4|t*4mL", "E(t*4|)*2L", "()*2Et*8L", "Et*4*2|L",
    "t**2", "Et*8||L", "", "|", "Et*4|t*4|", "E t*8L",
]
LAYOUTS_MTP1 = [
    "Et*4|t*4mL", "Et*4|t*4|m|L", "Et*4|t*4|mL|", "Et*2|t*2|t*2|t*2mL", "Et*8|mL",
    "Et*4|t*4m|L|", "Et*4m|t*4L", "Et*4|t*4L", "Et*4|t*4mmL", "Et*8m|L", "E|t*8|m|L",
    "Et*4|t*4|m|L|E", "Et*2|t*2|t*2|t*2|m|L", "Et*4|t*4|L|m",
]
LAYOUTS_MTP2 = [
    "Et*4|t*4mmL", "Et*4|t*4|m*2|L", "Et*4|t*4m|m|L", "Et*8|m|mL", "Et*4|t*4|mm|L",
    "Et*4|tt|tt|m*2L", "E(t*2|)*4,m*2,L",
]


def pipeplan_reads(profile, layout, p, tmp_path):
    out = tmp_path / "back.json"
    m = 2 * p
    proc = run_cli("search", "-p", p, "-m", m, "--layers", profile, "--layout", layout,
                   "--time-limit", "0.05", "-o", out, check=False)
    if proc.returncode == 0:
        return json.loads(out.read_text())["partition"], None
    assert proc.returncode == 2, (layout, p, proc.returncode, proc.stderr)
    return None, proc.stderr


@pytest.mark.parametrize("mtp,layouts", [(0, LAYOUTS_8), (1, LAYOUTS_MTP1), (2, LAYOUTS_MTP2)])
def test_search_layout_reads_as_megatron(megatron, tmp_path, mtp, layouts):
    """pipeplan's reading of a layout string (search --layout) against
    PipelineParallelLayerLayout + validate_layer_layout, p = 1..4."""
    profile = write_profile(tmp_path, "model", mtp=mtp)
    agreed = pipeplan_only = 0
    for layout, p in itertools.product(layouts, (1, 2, 3, 4)):
        verdict = megatron.layout_verdict(layout, p, 8, mtp)
        partition, message = pipeplan_reads(profile, layout, p, tmp_path)
        where = "layout %r p=%d mtp=%d: megatron %s, pipeplan %s" % (
            layout, p, mtp, verdict or "accepts", message or partition)
        if verdict is None and partition is None:
            # pipeplan's own rule: a stage with no profile layer (Megatron builds empty stages).
            assert "holds no layer of the profile" in message, where
            pipeplan_only += 1
            continue
        assert (verdict is None) == (partition is not None), where
        if partition is not None:
            sizes = stage_sizes(megatron.placement(layout, p), p, 8, mtp)
            assert partition == sizes, where
        agreed += 1
    assert agreed > pipeplan_only


def test_search_layout_long_strings_are_refused_before_expanding(tmp_path):
    profile = write_profile(tmp_path, "model")
    proc = run_cli("search", "-p", 1, "-m", 2, "--layers", profile, "--layout",
                   "E(t)*99999999999999L", check=False)
    assert proc.returncode == 2 and "expands past the supported" in proc.stderr


def test_search_layout_warns_where_megatron_cannot_interleave(tmp_path):
    profile = write_profile(tmp_path, "model")
    proc = run_cli("search", "-p", 4, "-m", 6, "--layers", profile, "--layout",
                   "Et|t*2|t|t|t|t|t|L", "--time-limit", "0.05", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Megatron cannot run this layout here" in proc.stderr


# --------------------------------------------------------------- export megatron

def arg(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def compositions(total, parts, rng, count):
    """`count` random partitions of `total` layers into `parts` stages of >= 1."""
    out = set()
    for _ in range(count * 4):
        cuts = sorted(rng.sample(range(1, total), parts - 1))
        out.add(tuple(b - a for a, b in zip([0] + cuts, cuts + [total])))
        if len(out) == count:
            break
    return sorted(out)


MODELS = [  # name, blocks, mtp, embedding, head
    ("plain", 8, 0, True, True),
    ("mtp1", 8, 1, True, True),
    ("mtp2", 8, 2, True, True),
    ("bare", 8, 0, False, False),
]
SHAPES = [  # schedule, p, v, m
    ("1f1b", 2, 1, 4), ("1f1b", 4, 1, 6), ("interleaved-1f1b", 2, 2, 4),
    ("interleaved-1f1b", 2, 2, 3), ("interleaved-1f1b", 4, 2, 6), ("interleaved-1f1b", 4, 2, 8),
    ("interleaved-1f1b", 4, 2, 12), ("interleaved-1f1b", 2, 3, 6), ("interleaved-1f1b", 4, 2, 3),
]


def test_export_megatron_is_what_megatron_accepts(megatron, tmp_path):
    """export megatron over a grid of plans (p, v, m, partitions, models with
    and without embedding/head/MTP): every exported layout and its flags pass
    TransformerConfig and the interleaved check; every refusal is Megatron's
    (or a pipeplan grouping rule, named)."""
    rng = random.Random(35)
    seen = {"ok": 0, "microbatches": 0, "layout": 0, "grouping": 0}
    for schedule, p, v, m in SHAPES:
        plan_path = tmp_path / ("%s-%d-%d-%d.json" % (schedule, p, v, m))
        run_cli("plan", "-s", schedule, "-p", p, "-m", m, "-v", v, "-o", plan_path)
        plan = json.loads(plan_path.read_text())
        interleave_verdict = megatron.interleaved_check(p, v, m) if (p > 1 and v > 1) else None
        for name, blocks, mtp, embedding, head in MODELS:
            profile = write_profile(tmp_path, name, blocks, mtp, embedding, head)
            total = (1 if embedding else 0) + blocks + mtp + (2 if head else 0)
            for partition in compositions(total, p * v, rng, 12):
                plan["partition"] = list(partition)
                plan_path.write_text(json.dumps(plan))
                proc = run_cli("export", "megatron", plan_path, "--layers", profile, "-f", "json",
                               check=False)
                where = "%s p=%d v=%d m=%d %s %s: %s" % (schedule, p, v, m, name, partition,
                                                         proc.stderr.strip())
                if proc.returncode == 0:
                    doc = json.loads(proc.stdout)
                    args = doc["args"]
                    assert interleave_verdict is None, where + " / megatron: " + interleave_verdict
                    assert int(arg(args, "--pipeline-model-parallel-size")) == p
                    assert int(arg(args, "--num-layers")) == blocks, where  # norm is no layer
                    assert int(arg(args, "--mtp-num-layers") or 0) == mtp, where
                    verdict = megatron.layout_verdict(doc["layout"], p, blocks, mtp)
                    assert verdict is None, where + " / megatron: " + verdict
                    sizes = stage_sizes(megatron.placement(doc["layout"], p), p, blocks, mtp,
                                        embedding, head)
                    assert sizes == list(partition), where
                    check_alternative(megatron, doc, p, v, blocks)
                    seen["ok"] += 1
                    continue
                assert proc.returncode == 2, where
                if "interleaved 1F1B" in proc.stderr:
                    assert interleave_verdict is not None, where
                    assert re.search(r"m % p == 0|at least p microbatches", proc.stderr), where
                    seen["microbatches"] += 1
                elif "layout '" in proc.stderr:
                    layout = re.search(r"layout '([^']*)'", proc.stderr).group(1)
                    verdict = megatron.layout_verdict(layout, p, blocks, mtp)
                    assert verdict is not None, where
                    seen["layout"] += 1
                else:
                    assert re.search(r"is one layer|builds the final norm", proc.stderr), where
                    seen["grouping"] += 1
    print("export megatron grid:", seen)
    assert seen["ok"] and seen["microbatches"] and seen["layout"] and seen["grouping"]


def check_alternative(megatron, doc, p, v, blocks):
    """The alternative flags (no layout) name an even split Megatron accepts."""
    alt = doc["alternative_args"]
    if not alt:
        return
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig
    per = arg(alt, "--num-layers-per-virtual-pipeline-stage")
    kwargs = dict(num_layers=blocks, pipeline_model_parallel_size=p,
                  pipeline_dtype=torch.float32, **HIDDEN)
    if per is not None:
        kwargs["virtual_pipeline_model_parallel_size"] = blocks // (p * int(per))
        assert kwargs["virtual_pipeline_model_parallel_size"] == v
    TransformerConfig(**kwargs)


def test_interleaved_rule_refused_with_megatrons_reason(megatron, tmp_path):
    """The issue's case: interleaved p=4 m=6, which Megatron refuses at its first step."""
    assert megatron.interleaved_check(4, 2, 6) is not None
    assert megatron.interleaved_check(4, 2, 8) is None
    profile = write_profile(tmp_path, "model")
    plan = tmp_path / "p4m6.json"
    run_cli("plan", "-s", "interleaved-1f1b", "-p", 4, "-m", 6, "-v", 2, "-o", plan)
    proc = run_cli("export", "megatron", plan, "--layers", profile, check=False)
    assert proc.returncode == 2
    assert "m % p == 0" in proc.stderr and "remainder 2" in proc.stderr
