#!/usr/bin/env python3
"""Independent reference for the torch-compatible schedules' compute orders.

Re-derives, from the description of torch.distributed.pipelining 2.11's
schedule classes, the compute-only order per rank (idle slots dropped) of
Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble and
DualPipeV, and which shapes torch refuses. Written from scratch in a
different style from the C++ planners (an explicit step simulation with
per-stage counters) so the golden files do not share code with them.

Usage: gen_torch_orders.py OUT_DIR   (writes the golden files listed in
SHAPES plus refused.txt for the whole test grid). Needs only python3.
"""

import os
import sys
from collections import deque

# ---------------------------------------------------------------- actions
# An action is a tuple: ("F"|"B"|"I"|"W", stage, mb) or
# ("OV", f_stage, f_mb, b_stage, b_mb) for an overlapped F + full B.


def fmt(a):
    if a[0] == "OV":
        return "(%dF%d;%dB%d)OVERLAP_F_B" % (a[1], a[2], a[3], a[4])
    return "%d%s%d" % (a[1], a[0], a[2])


class Refused(Exception):
    pass


# ------------------------------------------------ interleaved 1F1B and ZB1P
def interleaved(p, m, v, r, zero_bubble):
    """One rank of Interleaved1F1B (zero_bubble False) or
    InterleavedZeroBubble (True). Loop mapping: local chunk c is stage c*p+r."""
    rounds = max(1, m // p)
    if m % rounds:
        raise Refused("m %% rounds: m=%d rounds=%d" % (m, rounds))
    per_round = m // rounds
    hop = 1 if zero_bubble else 2
    warm = min((v - 1) * per_round + hop * (p - 1 - r), m * v)
    steady = m * v - warm  # steps doing one F and one backward
    cool = warm            # steps doing only a backward
    bkind = "I" if zero_bubble else "B"

    def fstage(step):
        return ((step // per_round) % v) * p + r

    def bstage(step):
        return (v - 1 - ((step - warm) // per_round) % v) * p + r

    nf, nb, nw = {}, {}, {}
    out = []
    backward_steps = []   # step id of each backward, in issue order
    w_done = 0

    def take(counter, stage):
        k = counter.get(stage, 0)
        counter[stage] = k + 1
        return k

    def maybe_weight(step):
        nonlocal w_done
        # ZB1P: rank r keeps its first r backwards' W pending (1F1B-like),
        # afterwards each step retires the oldest pending W.
        if zero_bubble and step - warm >= r:
            s = bstage(backward_steps[w_done])
            out.append(("W", s, take(nw, s)))
            w_done += 1

    for step in range(warm + steady + cool):
        if step < warm:
            s = fstage(step)
            out.append(("F", s, take(nf, s)))
            continue
        if step < warm + steady:
            s = fstage(step)
            out.append(("F", s, take(nf, s)))
        s = bstage(step)
        out.append((bkind, s, take(nb, s)))
        backward_steps.append(step)
        maybe_weight(step)
    while zero_bubble and w_done < len(backward_steps):
        s = bstage(backward_steps[w_done])
        out.append(("W", s, take(nw, s)))
        w_done += 1
    return out


# ------------------------------------------------------------- looped BFS
def looped_bfs(p, m, v, r):
    stages = [c * p + r for c in range(v)]
    out = [("F", s, k) for s in stages for k in range(m)]
    out += [("B", s, k) for s in reversed(stages) for k in reversed(range(m))]
    return out


# ------------------------------------------------------------------ ZB-V
def zbv(p, m, v, r):
    if v != 2:
        raise Refused("v != 2")
    n = max(2 * p - 1, m)     # plan as if at least 2p-1 microbatches ...
    lo, hi = r, 2 * p - 1 - r  # V mapping: chunk 0 going down, chunk 1 up
    cnt = {"f0": 0, "f1": 0, "b0": 0, "b1": 0}
    out = []

    def emit(kind, chunk, key):
        stage = lo if chunk == 0 else hi
        out.append((kind, stage, cnt[key]))

    def fwd(chunk):
        key = "f%d" % chunk
        emit("F", chunk, key)
        cnt[key] += 1

    def inp_wt(chunk):  # I then W of the same microbatch
        key = "b%d" % chunk
        emit("I", chunk, key)
        emit("W", chunk, key)
        cnt[key] += 1

    for _ in range(2 * (p - r) - 1):
        fwd(0)
    for _ in range(r):
        fwd(1)
        fwd(0)
    for _ in range(p - r):
        fwd(1)
        inp_wt(1)
    while cnt["f1"] < cnt["f0"] or cnt["f0"] < n:
        if cnt["f0"] < n:
            fwd(0)
        inp_wt(0)
        fwd(1)
        inp_wt(1)
    w0, w1 = cnt["b0"], cnt["b1"]
    for _ in range(r):
        out.append(("I", lo, cnt["b0"]))
        cnt["b0"] += 1
        out.append(("I", hi, cnt["b1"]))
        cnt["b1"] += 1
    for _ in range(p - r):
        out.append(("I", lo, cnt["b0"]))
        cnt["b0"] += 1
        out.append(("W", lo, w0))
        w0 += 1
    while w1 < cnt["b1"]:
        out.append(("W", hi, w1))
        w1 += 1
    while w0 < cnt["b0"]:
        out.append(("W", lo, w0))
        w0 += 1
    # ... and drop the microbatches that do not exist.
    return [a for a in out if a[2] < m]


# ------------------------------------------------------------- DualPipeV
def dualpipev(p, m, v, r):
    if v != 2:
        raise Refused("v != 2")
    if m < 2 * p:
        raise Refused("m < 2p")
    s0, s1 = r, 2 * p - 1 - r
    f = {s0: 0, s1: 0}       # next forward microbatch per stage
    b = {s0: 0, s1: 0}       # next backward (B or I) microbatch per stage
    pending_w = deque()      # (stage, mb) of I's whose W is still due
    out = []

    def F(s):
        out.append(("F", s, f[s]))
        f[s] += 1

    def back(s, split):
        out.append(("I" if split else "B", s, b[s]))
        if split:
            pending_w.append((s, b[s]))
        b[s] += 1

    def W():
        if pending_w:
            s, k = pending_w.popleft()
            out.append(("W", s, k))

    def overlap(fs, bs):
        out.append(("OV", fs, f[fs], bs, b[bs]))
        f[fs] += 1
        b[bs] += 1

    for _ in range(2 * (p - r - 1)):
        F(s0)
    for _ in range(r + 1):
        F(s0)
        F(s1)
    for _ in range(p - r - 1):
        back(s1, True)
        W()
        F(s1)
    for i in range(m - 2 * p + r + 1):
        if i == 0 and r == p - 1:
            F(s0)
            back(s1, False)
        else:
            overlap(s0, s1)
        overlap(s1, s0)
    for _ in range(p - r - 1):
        back(s1, False)
        overlap(s1, s0)
    split = False
    half = (r + 1) // 2
    for i in range(r + 1):
        if i == half and r % 2 == 1:
            split = True
        back(s1, split)
        if i == half and r % 2 == 0:
            split = True
        back(s0, split)
    for _ in range(p - r - 1):
        W()
        back(s0, split)
    for _ in range(r + 1):
        W()
    return out


SCHEDULES = {
    "interleaved-1f1b": ("loop", lambda p, m, v, r: interleaved(p, m, v, r, False)),
    "looped-bfs": ("loop", looped_bfs),
    "interleaved-zb": ("loop", lambda p, m, v, r: interleaved(p, m, v, r, True)),
    "zbv": ("v", zbv),
    "dualpipev": ("v", dualpipev),
}


def rank_of(mapping, p, s):
    if mapping == "loop":
        return s % p
    c, o = divmod(s, p)
    return o if c % 2 == 0 else p - 1 - o


def leaves(a):
    if a[0] == "OV":
        return [("F", a[1], a[2]), ("B", a[3], a[4])]
    return [a]


def check_runnable(name, p, m, v, ranks):
    """torch's constructor lowers the order (comm insertion walks the ranks
    round-robin, each taking its next action once its inputs exist) and
    fails on a stall; it also validates counts. Mirror both."""
    mapping = SCHEDULES[name][0]
    S = p * v
    done = set()
    pos = [0] * p

    def ready(r, a):
        kind, s, k = a
        if kind == "F":
            return s == 0 or ("F", s - 1, k) in done
        if kind in ("B", "I"):
            return s == S - 1 or ("B", s + 1, k) in done or ("I", s + 1, k) in done
        return True

    progress = True
    while progress:
        progress = False
        for r in range(p):
            if pos[r] < len(ranks[r]) and all(ready(r, x) for x in leaves(ranks[r][pos[r]])):
                for x in leaves(ranks[r][pos[r]]):
                    done.add(x)
                pos[r] += 1
                progress = True
    if any(pos[r] < len(ranks[r]) for r in range(p)):
        raise Refused("stalls")
    # counts, placement and in-rank order (torch validates F before B/I
    # and I before W of the same stage and microbatch)
    seen = {}
    for r in range(p):
        for a in ranks[r]:
            for x in leaves(a):
                need = {"B": "F", "I": "F", "W": "I"}.get(x[0])
                if need and (need, x[1], x[2]) not in seen:
                    raise Refused("invalid order")
                assert rank_of(mapping, p, x[1]) == r, (name, p, m, v, x)
                assert x not in seen, (name, p, m, v, x)
                seen[x] = r
    for s in range(S):
        for k in range(m):
            assert ("F", s, k) in seen
            assert (("B", s, k) in seen) != (("I", s, k) in seen and ("W", s, k) in seen)


def plan(name, p, m, v):
    fn = SCHEDULES[name][1]
    ranks = [fn(p, m, v, r) for r in range(p)]
    check_runnable(name, p, m, v, ranks)
    return ranks


# Golden shapes: small ones checked by hand in the docs plus a spread that
# exercises rounds, warmup caps, odd/even ranks and the ZB-V dropping.
SHAPES = [
    ("interleaved-1f1b", 2, 4, 2), ("interleaved-1f1b", 4, 8, 2),
    ("interleaved-1f1b", 4, 10, 2), ("interleaved-1f1b", 4, 3, 2),
    ("interleaved-1f1b", 3, 6, 3), ("interleaved-1f1b", 2, 2, 4),
    ("interleaved-1f1b", 4, 4, 1), ("interleaved-1f1b", 8, 16, 2),
    ("looped-bfs", 2, 4, 2), ("looped-bfs", 4, 8, 2), ("looped-bfs", 3, 5, 3),
    ("interleaved-zb", 2, 4, 2), ("interleaved-zb", 4, 8, 2),
    ("interleaved-zb", 4, 12, 2), ("interleaved-zb", 3, 6, 3),
    ("interleaved-zb", 4, 4, 1), ("interleaved-zb", 4, 3, 2),
    ("zbv", 2, 4, 2), ("zbv", 4, 8, 2), ("zbv", 4, 3, 2), ("zbv", 3, 9, 2),
    ("zbv", 1, 2, 2),
    ("dualpipev", 2, 4, 2), ("dualpipev", 4, 8, 2), ("dualpipev", 3, 10, 2),
    ("dualpipev", 4, 11, 2), ("dualpipev", 1, 3, 2),
]

GRID_V = {"interleaved-1f1b": [1, 2, 3, 4], "looped-bfs": [1, 2, 3, 4],
          "interleaved-zb": [1, 2, 3, 4], "zbv": [2], "dualpipev": [2]}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, p, m, v in SHAPES:
        ranks = plan(name, p, m, v)
        path = os.path.join(out_dir, "%s_p%d_m%d_v%d.txt" % (name, p, m, v))
        with open(path, "w") as f:
            for acts in ranks:
                f.write(" ".join(fmt(a) for a in acts) + "\n")
    lines = []
    for name in SCHEDULES:
        for p in range(1, 9):
            for m in range(1, 33):
                for v in GRID_V[name]:
                    try:
                        plan(name, p, m, v)
                    except Refused as e:
                        lines.append("%s %d %d %d %s" % (name, p, m, v, str(e).split(":")[0].replace(" ", "")))
    with open(os.path.join(out_dir, "refused.txt"), "w") as f:
        f.write("# schedule p m v why (grid p 1..8, m 1..32, v as allowed); generated by gen_torch_orders.py\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
