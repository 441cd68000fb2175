#!/usr/bin/env python3
"""Records sail-sg's V-Half / V-Min orders as pipeplan compute orders.

Runs the generator of sail-sg/zero-bubble-pipeline-parallelism (file
megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py, the
schedules of Qi et al., "Pipeline Parallelism with Controllable Memory",
2024) from a checkout of that repository, the way its runtime calls it
(runtime.py: PipelineGraph(p, m, "half" | "min", 1000, 1000, 1000, 1)),
and writes one file per shape, one line per rank: that rank's order in
pipeplan's action notation (stage, type, microbatch; "B" of a split
backward is pipeplan's I). Only the standard library is needed: the two
files the generator imports are loaded from the checkout directly.

    python3 gen_sail_vshape.py --sail /path/to/zero-bubble-pipeline-parallelism --out DIR
"""
import argparse
import contextlib
import importlib.util
import io
import os
import sys
import types

PKG = "megatron.core.pipeline_parallel.zerobubble.scheduler"
# The recorded grid: p = 2..8 with m = 2p, 3p, 4p, and a few m that are not
# multiples of p.
GRID = [(p, k * p) for p in (2, 3, 4, 5, 6, 8) for k in (2, 3, 4)] + [
    (4, 10), (4, 13), (3, 7), (8, 20)]
MODES = {"v-half": "half", "v-min": "min"}


def load_generator(root):
    """Imports zbv_greedy.py (and graph.py, its one import) from `root`."""
    src = os.path.join(root, *PKG.split("."))
    parts = PKG.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        mod = sys.modules.setdefault(name, types.ModuleType(name))
        mod.__path__ = []
    for leaf in ("graph", "zbv_greedy"):
        spec = importlib.util.spec_from_file_location(
            PKG + "." + leaf, os.path.join(src, leaf + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[PKG + ".zbv_greedy"]


def orders(gen, mode, p, m):
    """One pipeplan order string per rank."""
    graph = gen.PipelineGraph(p, m, mode, 1000, 1000, 1000, 1)
    config = types.SimpleNamespace(max_chunks=2, n_stages=p)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints the bubble rate
        local = graph.create_schedule(config)
    kind = {"F": "F", "B": "I", "W": "W"}
    return [" ".join("%d%s%d" % (n.layer_group_idx, kind[str(n.type)], n.microbatch)
                     for n in rank) for rank in local]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sail", required=True, help="checkout of sail-sg's repository")
    ap.add_argument("--out", required=True, help="directory for <name>_p<P>_m<M>_v2.txt")
    args = ap.parse_args()
    gen = load_generator(args.sail)
    for name, mode in MODES.items():
        for p, m in GRID:
            lines = orders(gen, mode, p, m)
            path = os.path.join(args.out, "%s_p%d_m%d_v2.txt" % (name, p, m))
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
