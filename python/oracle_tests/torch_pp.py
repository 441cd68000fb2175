"""Runs pipeplan's torch CSVs in torch's own pipelining runtime (the oracle).

A tiny transformer (one TransformerEncoderLayer per pipeline stage, a Linear
head on the last) is written once to a weights file; every rank and the
unpipelined reference load that same file. run_cases() spawns p ranks
(torch.multiprocessing, Gloo on 127.0.0.1, a free port), and for each case
builds real `PipelineStage`s for the stages the CSV gives that rank, loads
the CSV with the real `_PipelineScheduleRuntime._load_csv(path, format)`
and runs one `step`. It returns the mean microbatch loss and every
parameter's gradient by its name in the full model ("blocks.3.linear1.weight",
"head.bias"), or the error a rank raised. With `trace_dir` the step runs
under torch.profiler (after one warm-up step, as torchtitan's profiler
schedule does) and each rank writes torch's own Chrome trace to
trace_dir/iteration_2/rank<R>_trace.json.gz, torchtitan's folder layout.

reference() runs the same weights unpipelined: the loss and gradients the
pipelined step must reproduce (loss = mean over microbatches of the MSE).
run_executor() runs a pipeplan plan on pipeplan's own executor on the same
model, weights file and batch (tests/exec/exec_transformer.cc, one process a
rank, Gloo) and returns the same kind of result.

Written against torch 2.15.0 (torch/distributed/pipelining/schedules.py).
"""

import datetime
import gzip
import os
import re
import shutil
import socket
import tempfile
import time
import queue as queue_mod
import traceback

HIDDEN = 16
HEADS = 2
SEQ = 4
MB_SIZE = 2  # samples per microbatch


def build_model(torch, n_stages, hidden=HIDDEN):
    """The unpipelined model: blocks[0..n-1] then head."""
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([
                torch.nn.TransformerEncoderLayer(hidden, HEADS, dim_feedforward=2 * hidden,
                                                 dropout=0.0, batch_first=True)
                for _ in range(n_stages)])
            self.head = torch.nn.Linear(hidden, hidden)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)
    return Tiny()


def stage_module(torch, full, stage, n_stages):
    """Stage `stage` of `full`: its block (and the head on the last stage), sharing
    the parameters so gradients land in the full model's names."""
    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = full.blocks[stage]
            self.head = full.head if stage == n_stages - 1 else None

        def forward(self, x):
            x = self.block(x)
            return self.head(x) if self.head is not None else x
    return Stage()


def make_weights(path, n_stages, hidden=HIDDEN, seed=0):
    import torch
    torch.manual_seed(seed)
    # A plain dict: torch::pickle_load (pipeplan's executor, exec_transformer)
    # reads the same file.
    torch.save(dict(build_model(torch, n_stages, hidden).state_dict()), path)


def batch(torch, m, hidden=HIDDEN, seq=SEQ):
    g = torch.Generator().manual_seed(7)
    return (torch.randn(m * MB_SIZE, seq, hidden, generator=g),
            torch.randn(m * MB_SIZE, seq, hidden, generator=g))


def stages_in_csv(text):
    """Per rank, the stage indices its row names (torch's CSV: one row a rank)."""
    rows = [r for r in text.replace("\r\n", "\n").split("\n") if r.strip()]
    out = []
    for row in rows:
        stages = set()
        for cell in row.split(","):
            for s in re.findall(r"(?:^|[(;])\s*(\d+)[A-Z]", cell.strip()):
                stages.add(int(s))
        out.append(sorted(stages))
    return out


def reference(weights, n_stages, m, hidden=HIDDEN, seq=SEQ):
    """(loss, {name: grad}) of the unpipelined model on the same weights and batch."""
    import torch
    model = build_model(torch, n_stages, hidden)
    model.load_state_dict(torch.load(weights))
    x, y = batch(torch, m, hidden, seq)
    total = 0.0
    for xm, ym in zip(x.chunk(m), y.chunk(m)):
        loss = torch.nn.functional.mse_loss(model(xm), ym) / m
        loss.backward()
        total += float(loss.detach())
    return total, {n: q.grad.clone() for n, q in model.named_parameters()}


def _worker(rank, p, port, cases, queue):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=p,
                            timeout=datetime.timedelta(seconds=60))
    # Stage init posts a dummy send/recv to each neighbour stage; in a V
    # placement a neighbour may sit on the same rank, which Gloo cannot do
    # (a send to itself). Those self-pairs carry nothing the schedule uses.
    # (torch 2.11 had PipelineStage._get_init_p2p_neighbors_ops; 2.15 has not.)
    init_ops = getattr(PipelineStage, "_get_init_p2p_neighbors_ops", None)
    if init_ops is not None:
        def no_self_ops(stage_self):
            return [op for op in init_ops(stage_self)
                    if getattr(op, "group_peer", getattr(op, "peer", None)) != rank]
        PipelineStage._get_init_p2p_neighbors_ops = no_self_ops
    try:
        for i, case in enumerate(cases):
            try:
                queue.put((i, rank, "ok", _run_case(torch, dist, PipelineStage,
                                                    _PipelineScheduleRuntime, rank, case)))
            except Exception:
                queue.put((i, rank, "error", traceback.format_exc()))
            dist.barrier()  # a failed case must not leave messages for the next
    finally:
        dist.destroy_process_group()


def _run_case(torch, dist, PipelineStage, Runtime, rank, case):
    text = case["csv"]
    m = case["m"]
    per_rank = stages_in_csv(text)
    n = max(max(s) for s in per_rank if s) + 1
    mine = per_rank[rank]
    hidden, seq = case.get("hidden", HIDDEN), case.get("seq", SEQ)
    full = build_model(torch, n, hidden)
    full.load_state_dict(torch.load(case["weights"]))
    stages = [PipelineStage(stage_module(torch, full, s, n), s, n, torch.device("cpu"))
              for s in mine]
    sched = Runtime(stages, m, loss_fn=torch.nn.MSELoss())
    sched._load_csv(case["path"], format=case["format"])
    x, y = batch(torch, m, hidden, seq)

    def step():
        full.zero_grad(set_to_none=True)
        dist.barrier()  # ranks start the step together (no start-up skew in traces)
        losses = []
        kwargs = {}
        if n - 1 in mine:
            kwargs = {"target": y, "losses": losses}
        if 0 in mine:
            sched.step(x, **kwargs)
        else:
            sched.step(**kwargs)
        return losses

    trace_dir = case.get("trace_dir")
    if trace_dir:
        from torch.profiler import ProfilerActivity, profile, schedule

        def on_ready(prof):  # torchtitan's layout: iteration_N/rankR_trace.json.gz
            folder = os.path.join(trace_dir, "iteration_%d" % (prof.step_num))
            os.makedirs(folder, exist_ok=True)
            plain = os.path.join(folder, "rank%d_trace.json" % rank)
            prof.export_chrome_trace(plain)
            with open(plain, "rb") as f, gzip.open(plain + ".gz", "wb") as g:
                shutil.copyfileobj(f, g)
            os.remove(plain)

        with profile(activities=[ProfilerActivity.CPU],
                     schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                     on_trace_ready=on_ready) as prof:
            for _ in range(2):
                losses = step()
                prof.step()
    else:
        losses = step()
    grads = {}
    for s in mine:
        for name, q in stage_module(torch, full, s, n).named_parameters():
            full_name = ("blocks.%d." % s + name[len("block."):]) if name.startswith("block.") else name
            # plain lists: a tensor in a Queue is passed by a shared-memory
            # handle that dies with this process (a race at exit)
            grads[full_name] = q.grad.tolist()
    loss = sum(float(l.detach()) for l in losses) / m if losses else None
    return {"loss": loss, "grads": grads}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cases(p, cases, timeout=180):
    """Runs each case {"csv": text, "m": microbatches, "format": "compute_only" |
    "compute_comms", optional "trace_dir", "hidden", "seq"} on p Gloo ranks; one result a case:
    {"loss", "grads"} merged over ranks, or {"error": first rank's traceback}.
    Weights are written to a temporary file per case shape and shared."""
    import torch
    import torch.multiprocessing as mp

    tmp = tempfile.mkdtemp(prefix="torch_pp_")
    try:
        prepared = []
        for i, c in enumerate(cases):
            c = {k: v for k, v in c.items() if k != "plan"}  # what the ranks need (picklable)
            c["path"] = os.path.join(tmp, "case%d.csv" % i)
            with open(c["path"], "w", newline="") as f:
                f.write(c["csv"])
            n = max(max(s) for s in stages_in_csv(c["csv"]) if s) + 1
            c["n"] = n
            hidden = c.get("hidden", HIDDEN)
            c["weights"] = os.path.join(tmp, "weights_n%d_h%d.pt" % (n, hidden))
            if not os.path.exists(c["weights"]):
                make_weights(c["weights"], n, hidden)
            prepared.append(c)
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_worker, args=(r, p, port, prepared, queue)) for r in range(p)]
        for pr in procs:
            pr.start()
        got = {}
        deadline = time.monotonic() + timeout
        while len(got) < p * len(prepared) and time.monotonic() < deadline:
            try:
                i, r, status, payload = queue.get(timeout=1)
                got[(i, r)] = (status, payload)
            except queue_mod.Empty:
                if not any(pr.is_alive() for pr in procs):
                    break
        for pr in procs:
            pr.join(timeout=20)
            if pr.is_alive():
                pr.kill()
        results = []
        for i, c in enumerate(prepared):
            res = {"loss": None, "grads": {}}
            for r in range(p):
                status, payload = got.get((i, r), ("error", "rank %d: no answer (hang or crash)" % r))
                if status != "ok":
                    res = {"error": "rank %d: %s" % (r, payload)}
                    break
                res["grads"].update({k: torch.tensor(v) for k, v in payload["grads"].items()})
                if payload["loss"] is not None:
                    res["loss"] = payload["loss"]
            if "error" not in res:
                res["reference"] = reference(c["weights"], c["n"], c["m"],
                                             c.get("hidden", HIDDEN), c.get("seq", SEQ))
            results.append(res)
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mismatches(result, atol=1e-5, rtol=1e-4):
    """What differs between a run and its unpipelined reference ([] when equal)."""
    import torch
    if "error" in result:
        return [result["error"].strip().splitlines()[-1]]
    loss, grads = result["reference"]
    bad = []
    if result["loss"] is None or abs(result["loss"] - loss) > atol + rtol * abs(loss):
        bad.append("loss %r != reference %r" % (result["loss"], loss))
    if set(grads) != set(result["grads"]):
        bad.append("parameters differ: missing %s" % sorted(set(grads) - set(result["grads"])))
    for name, g in grads.items():
        got = result["grads"].get(name)
        if got is not None and not torch.allclose(got, g, atol=atol, rtol=rtol):
            bad.append("%s: max |diff| %.3g" % (name, float((got - g).abs().max())))
    return bad


def run_executor(plans, timeout=180):
    """Runs each {"plan": pipeplan JSON text, "m": microbatches, optional
    "trace": path for rank 0's Chrome trace of the executor} on pipeplan's
    executor (PIPEPLAN_EXEC_TRANSFORMER, one process a rank); one result a
    plan, as run_cases gives."""
    import json
    import subprocess
    import torch
    binary = os.environ.get("PIPEPLAN_EXEC_TRANSFORMER")
    if not binary or not os.path.exists(binary):
        raise RuntimeError("PIPEPLAN_EXEC_TRANSFORMER names no built exec_transformer "
                           "(the executor is built with LibTorch)")
    tmp = tempfile.mkdtemp(prefix="exec_pp_")
    try:
        results = []
        for i, c in enumerate(plans):
            doc = json.loads(c["plan"])
            p = doc["pp_degree"]
            n = p * doc.get("stages_per_rank", 1)
            m = c["m"]
            hidden = c.get("hidden", HIDDEN)
            weights = os.path.join(tmp, "weights_n%d_h%d.pt" % (n, hidden))
            if not os.path.exists(weights):
                make_weights(weights, n, hidden)
            x, y = batch(torch, m, hidden, c.get("seq", SEQ))
            data = os.path.join(tmp, "data%d.pt" % i)
            torch.save({"x": x, "y": y}, data)
            plan_path = os.path.join(tmp, "plan%d.json" % i)
            with open(plan_path, "w") as f:
                f.write(c["plan"])
            port = free_port()
            procs = []
            for r in range(p):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(p), LOCAL_RANK=str(r),
                           LOCAL_WORLD_SIZE=str(p), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
                args = [binary, plan_path, weights, data, os.path.join(tmp, "out%d_%d.pt" % (i, r))]
                if c.get("trace"):  # every rank traces (collective); rank 0 writes the file
                    args += ["--trace", c["trace"]]
                # stderr to a file: a pipe read rank after rank could fill and stall a rank
                err_file = open(os.path.join(tmp, "err%d_%d.txt" % (i, r)), "w+")
                procs.append((subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                               stderr=err_file), err_file))
            res = {"loss": None, "grads": {}}
            deadline = time.monotonic() + timeout
            for r, (pr, err_file) in enumerate(procs):
                try:
                    pr.wait(timeout=max(1.0, deadline - time.monotonic()))
                    hung = ""
                except subprocess.TimeoutExpired:
                    pr.kill()
                    pr.wait()
                    hung = "no answer within %d s (hang)\n" % timeout
                err_file.seek(0)
                err = hung + err_file.read()
                err_file.close()
                if (hung or pr.returncode != 0) and "error" not in res:
                    res = {"error": "rank %d: exit %s: %s" % (r, pr.returncode, err)}
            if "error" not in res:
                for r in range(p):
                    # torch::pickle_save tags types (torch.jit._pickle): not weights_only
                    out = torch.load(os.path.join(tmp, "out%d_%d.pt" % (i, r)), weights_only=False)
                    if "loss" in out:
                        res["loss"] = float(out.pop("loss"))
                    res["grads"].update(out)
                res["reference"] = reference(weights, n, m, hidden, c.get("seq", SEQ))
            results.append(res)
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def differences(a, b, atol=1e-5, rtol=1e-4):
    """What differs between two pipelined runs of the same weights ([] when equal)."""
    import torch
    for r in (a, b):
        if "error" in r:
            return [r["error"].strip().splitlines()[-1]]
    bad = []
    if a["loss"] is None or b["loss"] is None or abs(a["loss"] - b["loss"]) > atol + rtol * abs(b["loss"]):
        bad.append("loss %r != %r" % (a["loss"], b["loss"]))
    if set(a["grads"]) != set(b["grads"]):
        bad.append("parameters differ: %s" % sorted(set(a["grads"]) ^ set(b["grads"])))
    for name, g in b["grads"].items():
        got = a["grads"].get(name)
        if got is not None and not torch.allclose(got, g, atol=atol, rtol=rtol):
            bad.append("%s: max |diff| %.3g" % (name, float((got - g).abs().max())))
    return bad
