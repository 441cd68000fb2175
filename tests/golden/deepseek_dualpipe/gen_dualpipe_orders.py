#!/usr/bin/env python3
"""Records DeepSeek's bidirectional DualPipe compute order per rank.

Runs the real `DualPipe.step` of deepseek-ai/DualPipe's `dualpipe/dualpipe.py`
(with `dualpipe/utils.py`'s real `WeightGradStore`) for every rank of a shape,
with torch replaced by small stand-ins: only the leaves that would run a
module (`_forward_compute_chunk`, `_backward_compute_chunk`,
`_forward_backward_compute_chunk`) and the transfers are replaced, by
recorders. The schedule's loops, its phase mapping, its counters, its
zero-bubble switch and its weight-gradient queue are DeepSeek's code.

Written in pipeplan's notation: rank r's phase 0 chunk (the forward-direction
pipeline, inputs on rank 0) is stage r, its phase 1 chunk (the reverse
pipeline, inputs on rank p-1) is stage 2p-1-r; chunk j of phase 0 is
microbatch j, chunk j of phase 1 is microbatch m/2 + j. A backward run with
`enable_zb` is an I whose W is the `WeightGradStore.pop()` that retires it;
an overlapped forward-backward is `(F;B)OVERLAP_F_B`.

Usage: gen_dualpipe_orders.py --dualpipe DIR --out DIR (DIR: a checkout of
deepseek-ai/DualPipe). Python 3 standard library only.
"""
import argparse
import importlib.util
import os
import sys
import types

# The shapes recorded: p even, m even and m >= 2p (DualPipe.step's asserts).
GRID = [(2, 4), (2, 6), (2, 8), (4, 8), (4, 10), (4, 12), (4, 16), (6, 12), (6, 14),
        (6, 20), (8, 16), (8, 18), (8, 24), (8, 32)]


def install_torch_stand_ins():
    """Just enough of torch for dualpipe.py, utils.py and comm.py to import."""
    torch = types.ModuleType("torch")
    nn = types.ModuleType("torch.nn")
    dist = types.ModuleType("torch.distributed")
    autograd = types.ModuleType("torch.autograd")

    class Module:
        def __init__(self, *args, **kwargs):
            pass

    nn.Module = Module
    nn.ModuleList = list
    torch.nn = nn
    torch.Tensor = type("Tensor", (), {})
    torch.dtype = type("dtype", (), {})
    torch.is_grad_enabled = lambda: True
    torch.stack = lambda xs: None
    torch.device = lambda *a: None
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0)
    dist.ProcessGroup = object
    dist.P2POp = object
    dist.distributed_c10d = types.SimpleNamespace()
    torch.distributed = dist
    autograd.Variable = object
    torch.autograd = autograd
    for name, mod in [("torch", torch), ("torch.nn", nn), ("torch.distributed", dist),
                      ("torch.autograd", autograd)]:
        sys.modules[name] = mod


def load(repo, name):
    spec = importlib.util.spec_from_file_location(
        "dualpipe." + name, os.path.join(repo, "dualpipe", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dualpipe." + name] = mod
    spec.loader.exec_module(mod)
    return mod


def record_rank(DualPipe, utils, comm, p, m, rank):
    out = []
    stage = (rank, 2 * p - 1 - rank)  # phase 0 / phase 1 chunk of this rank
    first_mb = (0, m // 2)

    def name(kind, phase, chunk):
        return f"{stage[phase]}{kind}{first_mb[phase] + chunk}"

    class Recorder(DualPipe):
        def __init__(self):  # the attributes DualPipe.__init__ derives from the group
            self.rank = rank
            self.num_ranks = p
            self.is_first_rank = rank == 0
            self.is_last_rank = rank == p - 1
            self.is_in_second_half = rank >= p // 2
            self.is_middle_rank = rank in (p // 2 - 1, p // 2)
            self.prev_rank, self.next_rank = rank - 1, rank + 1
            self.group = None
            self.batch_dim = 0
            self.overlapped_forward_backward = True

        # The leaves that would run a module: record instead.
        def _forward_compute_chunk(self, phase):
            phase ^= self.is_in_second_half
            chunk = self.current_f_chunk_id[phase]
            self.current_f_chunk_id[phase] += 1
            self.output_chunks[phase].append([None])  # what _send_forward ships
            out.append(name("F", phase, chunk))

        def _backward_compute_chunk(self, phase, enable_zb=False):
            phase ^= self.is_in_second_half
            chunk = self.current_b_chunk_id[phase]
            self.current_b_chunk_id[phase] += 1
            self.input_grad_chunks[phase].append([None])  # what _send_backward ships
            if enable_zb:  # the weight gradient waits in DeepSeek's queue
                out.append(name("I", phase, chunk))
                utils.WeightGradStore.put(lambda: out.append(name("W", phase, chunk)))
                utils.WeightGradStore.flush()
            else:
                out.append(name("B", phase, chunk))

        def _forward_backward_compute_chunk(self, phase0, phase1):
            phase0 ^= self.is_in_second_half
            phase1 ^= self.is_in_second_half
            f = self.current_f_chunk_id[phase0]
            b = self.current_b_chunk_id[phase1]
            self.current_f_chunk_id[phase0] += 1
            self.current_b_chunk_id[phase1] += 1
            self.output_chunks[phase0].append([None])
            self.input_grad_chunks[phase1].append([None])
            out.append(f"({name('F', phase0, f)};{name('B', phase1, b)})OVERLAP_F_B")

        def _commit_and_wait_comm(self):
            self.comm_ops = []

    comm.TENSOR_SHAPES = [(1,)]
    comm.TENSOR_DTYPE = object()
    comm.append_irecv = lambda ops, src, group: [None]
    comm.append_isend = lambda ops, tensors, dst, group: None
    dualpipe_mod = sys.modules["dualpipe.dualpipe"]
    dualpipe_mod.scatter = lambda xs, n, dim: [[] for _ in range(n)]
    dualpipe_mod.gather = lambda xs, dim: []
    Recorder().step(num_chunks=m, criterion=lambda *a: None)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dualpipe", required=True, help="a checkout of deepseek-ai/DualPipe")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    install_torch_stand_ins()
    sys.modules["dualpipe"] = types.ModuleType("dualpipe")
    utils = load(args.dualpipe, "utils")
    comm = load(args.dualpipe, "comm")
    DualPipe = load(args.dualpipe, "dualpipe").DualPipe
    for p, m in GRID:
        rows = [" ".join(record_rank(DualPipe, utils, comm, p, m, r)) for r in range(p)]
        with open(os.path.join(args.out, f"dualpipe_p{p}_m{m}_v2.txt"), "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
