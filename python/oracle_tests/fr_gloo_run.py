"""Replays the SEND/RECV of a pipeplan plan over real Gloo with torch's Flight
Recorder on, one process per rank, and writes each rank's dump.

torch 2.15's ProcessGroupGloo records only its collectives into the Flight
Recorder (its send/recv never reach it), and c10d's FlightRecorderHook skips
the ops of a backend that records itself ("gloo" is in distributed_c10d.py's
_FR_SELF_RECORDING_BACKENDS). So the ranks talk through a thin Python backend,
registered as "gloo_hooked", that hands every op to a real ProcessGroupGloo:
init_process_group then attaches torch's own FlightRecorderHook
(_maybe_attach_flight_recorder), which records each send and recv as
"gloo_hooked:send 0->1" / "gloo_hooked:recv 1<-0". Gloo pushes no completion,
so the hook retires each entry at issue and every state reads "scheduled".

Each rank runs its row in order: a SEND or RECV is posted (isend/irecv); a
compute waits for every receive posted before it and not yet waited; the
end waits for the rest (each op is waited once: a second wait() on a Gloo
op waits for another message). A wait that times out (a hang) stops the rank. Either way the rank
then writes torch._C._distributed_c10d._dump_fr_trace(backend="gloo_hooked")
to OUT/<prefix><rank>, the name torch's loader reads ranks from.

    python fr_gloo_run.py PLAN.csv OUT_DIR [--prefix rank] [--timeout 2]
"""

import argparse
import datetime
import os
import re
import socket
import sys

BACKEND = "gloo_hooked"
ACTION = re.compile(r"^(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|F|B|I|W)(\d+)$")


def read_plan(path):
    """Rows of (stage, type, microbatch), one row per rank (a loop-mapped CSV)."""
    rows = []
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().split(",") if c.strip()]
            if not cells:
                continue
            row = []
            for c in cells:
                m = ACTION.match(c)
                if not m:
                    raise ValueError("unsupported action %r" % c)
                row.append((int(m.group(1)), m.group(2), int(m.group(3))))
            rows.append(row)
    return rows


def peer(stage, kind, world):
    nxt = kind in ("SEND_F", "RECV_B")
    return (stage + 1 if nxt else stage - 1) % world


def _backend_class():
    from torch._C._distributed_c10d import Backend, ProcessGroupGloo

    class Hooked(Backend):
        def __init__(self, store, rank, size, timeout):
            super().__init__(rank, size)
            self.inner = ProcessGroupGloo(store, rank, size, timeout)

        def send(self, tensors, dst, tag=0):
            return self.inner.send(tensors, dst, tag)

        def recv(self, tensors, src, tag=0):
            return self.inner.recv(tensors, src, tag)

        def barrier(self, opts=None):
            return self.inner.barrier()

        def getBackendName(self):
            return BACKEND

    return Hooked


def _rank_main(rank, world, rows, out, prefix, port, timeout):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    hooked = _backend_class()
    dist.Backend.register_backend(BACKEND, lambda s, r, n, t: hooked(s, r, n, t), devices=["cpu"])
    dist.init_process_group(BACKEND, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=max(timeout * 2, 5)))
    wait_for = datetime.timedelta(seconds=timeout)
    # Gloo's Work.wait() waits for the buffer again: wait each op once.
    sends, recvs = [], []
    status = "completed"
    try:
        for stage, kind, mb in rows[rank]:
            if kind.startswith("SEND"):
                sends.append(dist.isend(torch.full((4,), float(mb)), dst=peer(stage, kind, world)))
            elif kind.startswith("RECV"):
                recvs.append(dist.irecv(torch.zeros(4), src=peer(stage, kind, world)))
            else:
                for w in recvs:
                    w.wait(timeout=wait_for)
                recvs = []
        for w in recvs + sends:
            w.wait(timeout=wait_for)
    except Exception as e:  # the wait timed out: the run hangs here
        status = "timed out (%s: %s)" % (type(e).__name__, str(e)[:300])
    data = torch._C._distributed_c10d._dump_fr_trace(includeStackTraces=False, backend=BACKEND)
    with open(os.path.join(out, "%s%d" % (prefix, rank)), "wb") as f:
        f.write(data)
    print("rank %d: %s" % (rank, status), flush=True)
    # A hung rank cannot shut the group down cleanly; leave without it.
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(plan_path, out, prefix="rank", timeout=2.0):
    """Runs the plan's SEND/RECV over Gloo, one process per rank; the dump paths."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    import torch.multiprocessing as mp

    rows = read_plan(plan_path)
    os.makedirs(out, exist_ok=True)
    mp.spawn(_rank_main, args=(len(rows), rows, out, prefix, free_port(), timeout),
             nprocs=len(rows), join=True)
    return [os.path.join(out, "%s%d" % (prefix, r)) for r in range(len(rows))]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan")
    ap.add_argument("out")
    ap.add_argument("--prefix", default="rank")
    ap.add_argument("--timeout", type=float, default=2.0)
    a = ap.parse_args()
    for p in run(a.plan, a.out, a.prefix, a.timeout):
        print(p)
    sys.exit(0)
