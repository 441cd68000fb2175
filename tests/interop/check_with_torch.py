#!/usr/bin/env python3
"""Runs pipeplan-written CSV schedules in torch.distributed.pipelining.

For each CSV in IN_DIR named <schedule>_p<P>_m<M>_v<V>.<format>.csv (format
"compute_only" or "compute_comms"), starts P processes (gloo on CPU,
loopback only), builds one small Linear stage per stage index with fixed
seeds, loads the file with torch's `_PipelineScheduleRuntime._load_csv(path,
format)` and runs one `step`. The gradients of every stage are compared with
a single-process reference (mean of the microbatch losses). Writes one line
per case to OUT_DIR/results.txt: "<file> ok" or "<file> FAIL <why>".

Not run by ctest (it needs PyTorch); docs/interop.md shows how it was used.
Usage: check_with_torch.py IN_DIR OUT_DIR [NAME_FILTER]
"""

import datetime
import os
import re
import sys
import traceback

WIDTH = 8
BATCH = 16


def stage_module(torch, stage):
    torch.manual_seed(1000 + stage)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())


def batch(torch):
    g = torch.Generator().manual_seed(7)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, WIDTH, generator=g)


def stages_of(rank, p, v, style):
    n = p * v
    out = []
    for c in range(v):
        if style == "loop" or c % 2 == 0:
            out.append(c * p + rank)
        else:
            out.append(c * p + (p - 1 - rank))
    return out


def worker(rank, p, m, v, style, path, fmt, port, queue):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=p,
                                timeout=datetime.timedelta(seconds=60))
        # torch's stage init posts a dummy send/recv towards each neighbour
        # stage; for V placements a neighbour can be on the same rank, which
        # gloo cannot do (NCCL can). Those self-pairs carry nothing the
        # schedule needs (same-rank boundaries never use P2P), so drop them.
        init_ops = PipelineStage._get_init_p2p_neighbors_ops

        def no_self_ops(stage_self):
            return [op for op in init_ops(stage_self)
                    if getattr(op, "group_peer", getattr(op, "peer", None)) != rank]

        PipelineStage._get_init_p2p_neighbors_ops = no_self_ops
        n = p * v
        mine = stages_of(rank, p, v, style)
        mods = {s: stage_module(torch, s) for s in mine}
        stages = [PipelineStage(mods[s], s, n, torch.device("cpu")) for s in mine]
        loss_fn = torch.nn.MSELoss()
        sched = _PipelineScheduleRuntime(stages, m, loss_fn=loss_fn)
        sched._load_csv(path, format=fmt)
        x, y = batch(torch)
        losses = []
        kwargs = {}
        if n - 1 in mine:
            kwargs["target"] = y
            kwargs["losses"] = losses
        if 0 in mine:
            sched.step(x, **kwargs)
        else:
            sched.step(**kwargs)
        grads = {s: [q.grad.clone() for q in mods[s].parameters()] for s in mine}
        dist.destroy_process_group()
        queue.put((rank, "ok", {s: [g.tolist() for g in gs] for s, gs in grads.items()},
                   [float(l.detach()) for l in losses]))
    except Exception:
        queue.put((rank, "error", traceback.format_exc(), None))


def reference(torch, n, m):
    mods = [stage_module(torch, s) for s in range(n)]
    x, y = batch(torch)
    for xm, ym in zip(x.chunk(m), y.chunk(m)):
        h = xm
        for mod in mods:
            h = mod(h)
        loss = torch.nn.functional.mse_loss(h, ym) / m
        loss.backward()
    return {s: [q.grad.clone() for q in mods[s].parameters()] for s in range(n)}


def main(in_dir, out_dir, only=""):
    import torch
    import torch.multiprocessing as mp

    os.makedirs(out_dir, exist_ok=True)
    results = []
    port = 29600
    names = sorted(f for f in os.listdir(in_dir) if f.endswith(".csv"))
    for name in names:
        match = re.match(r"(.+)_p(\d+)_m(\d+)_v(\d+)\.(compute_only|compute_comms)(\.\w+)?\.csv$", name)
        if not match or only not in name:
            continue
        sched, p, m, v, fmt = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4)), match.group(5)
        style = "v" if sched in ("zbv", "dualpipev") else "loop"
        port += 1
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, p, m, v, style, os.path.join(in_dir, name), fmt, port, queue))
                 for r in range(p)]
        for pr in procs:
            pr.start()
        got = []
        try:
            for _ in range(p):
                got.append(queue.get(timeout=120))
        except Exception:
            got.append((-1, "error", "timeout (hang?)", None))
        for pr in procs:
            pr.join(timeout=10)
            if pr.is_alive():
                pr.kill()
        errors = [g for g in got if g[1] != "ok"]
        if errors:
            why = errors[0][2].strip().splitlines()[-1]
            results.append("%s FAIL %s" % (name, why))
            with open(os.path.join(out_dir, name + ".log"), "w") as f:
                for e in errors:
                    f.write("rank %d:\n%s\n" % (e[0], e[2]))
            continue
        ref = reference(torch, p * v, m)
        bad = []
        for _, _, grads, _ in got:
            for s, gs in grads.items():
                for g, r in zip(gs, ref[int(s)]):
                    if not torch.allclose(torch.tensor(g), r, atol=1e-5, rtol=1e-4):
                        ratio = float(r.abs().sum()) / max(float(torch.tensor(g).abs().sum()), 1e-30)
                        bad.append("stage %s grad differs (|ref|/|got| = %.3f)" % (s, ratio))
        results.append("%s %s" % (name, "ok" if not bad else "FAIL " + "; ".join(sorted(set(bad)))))
    with open(os.path.join(out_dir, "results.txt"), "w") as f:
        f.write("torch %s\n" % torch.__version__)
        f.write("\n".join(results) + "\n")
    print("\n".join(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
