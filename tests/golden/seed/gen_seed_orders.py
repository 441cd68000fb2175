#!/usr/bin/env python3
"""Independent reference for zb-h1, zb-h2, vpp, vpp-fthenb and vpp-balanced.

Re-derives each rank's compute-only order from the sources' own control flow,
written from scratch and in a different form from the C++ planners:

* zb-h1 / zb-h2 replay the sail-sg Megatron driver loop (warmup forwards;
  steady forward + input-gradient backward with a FIFO of pending weight
  gradients that is popped only once the step count reaches the rank's
  deferral; cooldown; final flush). The C++ computes the same orders as a
  closed-form diagonal instead.
* vpp / vpp-fthenb / vpp-balanced replay Paddle's static scheduler (seed 002)
  step by step, printing "f<mb>_vp<chunk>" / "b<mb>_vp<chunk>" tokens with
  per-chunk counters as Paddle does; vpp's chunk sequence is built by
  concatenating blocks instead of evaluating Paddle's formula.

Every order is then replayed under unit costs (F=I=W=1, B=2, no comm cost,
unbounded buffers) to prove its dependencies are acyclic, and the script
prints makespan / bubble / peak live activations for the docs.

Usage: gen_seed_orders.py OUT_DIR   writes <schedule>_p<P>_m<M>_v<V>.txt for
SHAPES (one line per rank, torch grammar) and refused.txt (the shapes of the
sweep grid p 1..8, m 1..32, v 1..4 each schedule refuses). Needs python3 only.
"""

import os
import sys
from collections import deque

GRID_P = range(1, 9)
GRID_M = range(1, 33)
GRID_V = range(1, 5)


class Refused(Exception):
    pass


# ------------------------------------------------------------ sail-sg ZB-H*
def megatron_zb(p, m, r, warm, defer):
    """sail-sg's 1F1B loop with split backward. warm: forwards before the
    first backward; defer: steady steps before W starts being popped."""
    out = []
    pending = deque()           # weight-gradient store: mb ids, oldest first
    nf = 0
    nwarm = min(warm, m)
    remaining = m - nwarm

    def fwd():
        nonlocal nf
        out.append("%dF%d" % (r, nf))
        nf += 1

    ni = 0

    def inp():
        nonlocal ni
        out.append("%dI%d" % (r, ni))
        pending.append(ni)
        ni += 1

    def pop_w():
        out.append("%dW%d" % (r, pending.popleft()))

    for _ in range(nwarm):
        fwd()
    for k in range(remaining):
        fwd()
        inp()
        if k >= defer:
            pop_w()
    for j in range(nwarm):
        inp()
        if remaining + j >= defer:
            pop_w()
    while pending:
        pop_w()
    return out


def zb_h1(p, m, v, r):
    return megatron_zb(p, m, r, p - 1 - r, r)


def zb_h2(p, m, v, r):
    return megatron_zb(p, m, r, 2 * (p - 1 - r), 2 * r)


def refuse_zb(name, p, m, v):
    if v != 1:
        raise Refused("%s: v must be 1" % name)
    if m < p:
        raise Refused("%s: m < p" % name)


# ----------------------------------------------------------- Paddle (seed 002)
def tokens_to_actions(tokens, p, r):
    """'f3_vp1' -> '<1*p+r>F3', 'b0_vp0' -> '<r>B0'."""
    out = []
    for t in tokens:
        kind, rest = t[0], t[1:]
        mb, vp = rest.split("_vp")
        out.append("%d%s%s" % (int(vp) * p + r, "F" if kind == "f" else "B", mb))
    return out


def interleave_chunk_sequence(p, m, v):
    """Chunk of every forward step of PipelineParallelWithInterleave: the
    first m%p+p microbatches visit each chunk in a row, then blocks of p."""
    first = m % p + p
    seq = []
    for c in range(v):
        seq += [c] * first
    for _ in range((m - first) // p):
        for c in range(v):
            seq += [c] * p
    assert len(seq) == m * v
    return seq


def vpp(p, m, v, r):
    if v < 2 or p <= 2 or m < 2 * p:
        raise Refused("vpp")
    fseq = interleave_chunk_sequence(p, m, v)
    bseq = [v - 1 - c for c in fseq]
    num_steps = m * v
    first = m % p + p
    startup = min((p - r - 1) * 2 + (v - 1) * first, num_steps)
    steady = num_steps - startup
    fcount = [0] * v
    bcount = [0] * v
    tok = []

    def f(step):
        c = fseq[step]
        tok.append("f%d_vp%d" % (fcount[c], c))
        fcount[c] += 1

    def b(step):
        c = bseq[step]
        tok.append("b%d_vp%d" % (bcount[c], c))
        bcount[c] += 1

    for s in range(startup):
        f(s)
    for s in range(steady):
        f(s + startup)
        b(s)
    for s in range(steady, num_steps):
        b(s)
    return tokens_to_actions(tok, p, r)


def fthenb_chunk(step, m, v, forward):
    c = (step % (m * v)) // m
    return c if forward else v - 1 - c


def vpp_fthenb(p, m, v, r):
    if v < 2 or p <= 2 or m % p != 0:
        raise Refused("vpp-fthenb")
    fcount = [0] * v
    bcount = [0] * v
    tok = []
    for s in range(m * v):
        c = fthenb_chunk(s, m, v, True)
        tok.append("f%d_vp%d" % (fcount[c], c))
        fcount[c] += 1
    for s in range(m * v):
        c = fthenb_chunk(s, m, v, False)
        tok.append("b%d_vp%d" % (bcount[c], c))
        bcount[c] += 1
    return tokens_to_actions(tok, p, r)


def vpp_balanced(p, m, v, r):
    if v < 2 or p <= 2 or m % p != 0:
        raise Refused("vpp-balanced")
    startup = m * (v - 1) + p - r - 1
    steady = m - (p - r - 1)
    cooldown = startup
    fcount = [0] * v
    bcount = [0] * v
    tok = []

    def f(step):
        c = fthenb_chunk(step, m, v, True)
        tok.append("f%d_vp%d" % (fcount[c], c))
        fcount[c] += 1

    def b(step):
        c = fthenb_chunk(step, m, v, False)
        tok.append("b%d_vp%d" % (bcount[c], c))
        bcount[c] += 1

    for s in range(startup):
        f(s)
    for s in range(steady):
        f(s + startup)
        b(s)
    for s in range(cooldown):
        b(s + steady)
    return tokens_to_actions(tok, p, r)


def zb_checked(fn, name):
    def run(p, m, v, r):
        refuse_zb(name, p, m, v)
        return fn(p, m, v, r)
    return run


SCHEDULES = {
    "zb-h1": zb_checked(zb_h1, "zb-h1"),
    "zb-h2": zb_checked(zb_h2, "zb-h2"),
    "vpp": vpp,
    "vpp-fthenb": vpp_fthenb,
    "vpp-balanced": vpp_balanced,
}

# (schedule, p, m, v) written as golden files.
SHAPES = [
    ("zb-h1", 1, 3, 1), ("zb-h1", 2, 2, 1), ("zb-h1", 3, 5, 1), ("zb-h1", 4, 8, 1),
    ("zb-h2", 2, 3, 1), ("zb-h2", 3, 4, 1), ("zb-h2", 4, 5, 1), ("zb-h2", 4, 8, 1),
    ("vpp", 3, 6, 2), ("vpp", 3, 7, 2), ("vpp", 4, 8, 2), ("vpp", 4, 10, 3),
    ("vpp", 3, 8, 4),
    ("vpp-fthenb", 3, 3, 2), ("vpp-fthenb", 4, 8, 2), ("vpp-fthenb", 3, 6, 3),
    ("vpp-balanced", 3, 3, 2), ("vpp-balanced", 4, 4, 2), ("vpp-balanced", 4, 8, 2),
    ("vpp-balanced", 3, 6, 3),
]


# ------------------------------------------------------------- replay check
def parse(a):
    i = 0
    while a[i].isdigit():
        i += 1
    return a[i], int(a[:i]), int(a[i + 1:])


def replay(p, m, v, ranks):
    """Unit-cost list scheduling with unbounded buffers (loop mapping).
    Returns (makespan, busy per rank, peak live activations per rank);
    raises if some rank can never proceed."""
    ns = p * v
    cost = {"F": 1, "B": 2, "I": 1, "W": 1}
    done = {}
    pos = [0] * p
    clock = [0] * p
    live = [0] * p
    peak = [0] * p
    busy = [0] * p
    total = sum(len(x) for x in ranks)
    finished = 0
    while finished < total:
        progressed = False
        for r in range(p):
            while pos[r] < len(ranks[r]):
                t, s, mb = parse(ranks[r][pos[r]])
                assert s % p == r, "stage %d is not on rank %d" % (s, r)
                deps = []
                if t == "F" and s > 0:
                    deps.append(("F", s - 1, mb))
                if t in "BI":
                    deps.append(("F", s, mb))
                    if s < ns - 1:
                        deps.append(("BI", s + 1, mb))
                if t == "W":
                    deps.append(("I", s, mb))
                ready = 0
                ok = True
                for d in deps:
                    keys = [(k, d[1], d[2]) for k in d[0]]
                    hit = [done[k] for k in keys if k in done]
                    if not hit:
                        ok = False
                        break
                    ready = max(ready, hit[0])
                if not ok:
                    break
                start = max(clock[r], ready)
                clock[r] = start + cost[t]
                busy[r] += cost[t]
                done[(t, s, mb)] = clock[r]
                if t == "F":
                    live[r] += 1
                    peak[r] = max(peak[r], live[r])
                elif t in "BW":
                    live[r] -= 1
                pos[r] += 1
                finished += 1
                progressed = True
        if not progressed:
            stuck = [ranks[r][pos[r]] for r in range(p) if pos[r] < len(ranks[r])]
            raise RuntimeError("dependency cycle; stuck at %s" % stuck)
    # Each (stage, mb): one F and one B or one I + one W.
    for s in range(ns):
        for mb in range(m):
            assert ("F", s, mb) in done
            assert (("B", s, mb) in done) != (("I", s, mb) in done and ("W", s, mb) in done)
    return max(clock), busy, peak


def plan(name, p, m, v):
    return [SCHEDULES[name](p, m, v, r) for r in range(p)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, p, m, v in SHAPES:
        ranks = plan(name, p, m, v)
        span, busy, peak = replay(p, m, v, ranks)
        path = os.path.join(out_dir, "%s_p%d_m%d_v%d.txt" % (name, p, m, v))
        with open(path, "w") as f:
            for line in ranks:
                f.write(" ".join(line) + "\n")
        bubble = 1 - sum(busy) / (span * p)
        print("%-13s p=%d m=%2d v=%d makespan=%3d bubble=%.3f peak_live=%s"
              % (name, p, m, v, span, bubble, peak))
    refused = []
    accepted = 0
    for name in SCHEDULES:
        for p in GRID_P:
            for m in GRID_M:
                for v in GRID_V:
                    try:
                        ranks = plan(name, p, m, v)
                    except Refused:
                        refused.append("%s %d %d %d" % (name, p, m, v))
                        continue
                    replay(p, m, v, ranks)
                    accepted += 1
    with open(os.path.join(out_dir, "refused.txt"), "w") as f:
        f.write("# schedule p m v refused on the grid p 1..8, m 1..32, v 1..4\n")
        for line in refused:
            f.write(line + "\n")
    print("grid: %d accepted and replayed, %d refused" % (accepted, len(refused)))


if __name__ == "__main__":
    main()
