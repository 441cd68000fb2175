#!/usr/bin/env python3
"""pipeplan search's memory decisions on every example profile: budgets x makespans.

For each profile of examples/layers/ (tiny4 excepted) at p = 4, m = 8 and p = 8, m = 16,
no transfer cost (`--comm 0`), runs `pipeplan search` at B (1F1B's peak, the default budget), B/2
and B/4, with and without memory actions, and the unconstrained best ("free":
`--memory-limit 1e9 --no-recompute`); verifies every plan it writes under all three
transports and prints the Markdown table of docs/memory.md, then the issue's targets
met and missed:

- at B, never slower than the search without memory actions;
- at B/2, faster than the best library schedule with full recompute;
- at B/2 with recompute alone, within 25% of free;
- at B/2 with `--host-bw 1`, within 10% of free;
- at B/4, a plan whenever recompute makes one possible (the library with full
  recompute fits).

  scripts/memory_grid.py [--pipeplan build/pipeplan] [--time-limit S] [--only TEXT]...
                         [--check] [-o table.md]

--check exits 1 when a plan does not verify or exceeds its budget, or when a target
is missed. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-9
PROFILES = ["gpt50", "llama35", "moe40", "uniform32", "wheavy32", "wlight32"]
SHAPES = [(4, 8), (8, 16)]


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def search(opts, tmp, profile, p, m, budget, *flags):
    """One search; its JSON report plus `verified`, or dict(error=...) / dict(none=...)."""
    plan = os.path.join(tmp, "plan.json")
    args = [opts.pipeplan, "search", "-p", str(p), "-m", str(m), "--layers",
            os.path.join(ROOT, "examples", "layers", profile + ".csv"), "-f", "json", "-o", plan,
            "--comm", "0"]  # no transfer cost, stated (the search's default charges one)
    if budget is not None:
        args += ["--memory-limit", repr(budget)]
    if opts.time_limit:
        args += ["--time-limit", str(opts.time_limit)]
    args += list(flags)
    rc, out, err = run(args)
    if rc != 0:
        if "no plan fits" in err:
            return dict(none=err.strip())
        return dict(error=f"{' '.join(args)} exited {rc}: {err.strip()}")
    d = json.loads(out)
    vrc, _, verr = run([opts.pipeplan, "verify", plan, "--model", "all"])
    d["verified"] = vrc == 0
    d["verify_error"] = verr.strip()
    return d


def cell(d):
    if "none" in d:
        return "none fits"
    if "error" in d:
        return "error"
    acts = []
    if d["recomputed"]:
        acts.append(f"{d['recomputed']} r")
    if d["offloaded"]:
        acts.append(f"{d['offloaded']} o")
    return f"{d['makespan']:g} ({', '.join(acts) if acts else 'no actions'})"


def versus(d, free):
    if "makespan" not in d:
        return ""
    return f"{(d['makespan'] / free - 1) * 100:+.1f}%"


def measure(opts, tmp, profile, p, m):
    row = dict(profile=profile, p=p, m=m)
    base = search(opts, tmp, profile, p, m, None, "--no-recompute")
    if "makespan" not in base:
        row["error"] = base.get("error", base.get("none"))
        return row
    b = base["memory_limit"]
    row["B"] = b
    row["free"] = search(opts, tmp, profile, p, m, 1e9, "--no-recompute")
    row["B_nomem"] = base
    row["B_mem"] = search(opts, tmp, profile, p, m, b)
    row["half_rec"] = search(opts, tmp, profile, p, m, b / 2)
    row["half_off"] = search(opts, tmp, profile, p, m, b / 2, "--host-bw", "1")
    row["half_nomem"] = search(opts, tmp, profile, p, m, b / 2, "--no-recompute")
    row["quarter_rec"] = search(opts, tmp, profile, p, m, b / 4)
    return row


def problems(row):
    """The targets this row misses and the plans that fail a check."""
    out = []
    runs = [k for k in ("free", "B_nomem", "B_mem", "half_rec", "half_off", "half_nomem",
                        "quarter_rec") if k in row]
    for k in runs:
        d = row[k]
        if "error" in d:
            out.append(f"{k}: {d['error']}")
        elif "makespan" in d:
            if not d["verified"]:
                out.append(f"{k}: the plan does not verify: {d['verify_error']}")
            if d["peak_memory"] > d["memory_limit"] + EPS:
                out.append(f"{k}: peak {d['peak_memory']} above the budget {d['memory_limit']}")
            if d.get("time_limited"):
                out.append(f"{k}: hit the time limit")
    if "error" in row or "makespan" not in row.get("free", {}):
        return out
    free = row["free"]["makespan"]
    name = f"{row['profile']} p={row['p']}"
    if row["B_mem"].get("makespan", 1e300) > row["B_nomem"]["makespan"] + EPS:
        out.append(f"{name}: at B slower with memory actions than without")
    half = row["half_rec"]
    lib = half.get("best_library_recompute")
    if "makespan" in half and lib and half["makespan"] >= lib["makespan"] - EPS:
        out.append(f"{name}: at B/2 not faster than the library with full recompute")
    if half.get("makespan", 1e300) > 1.25 * free + EPS:
        out.append(f"{name}: at B/2 with recompute {versus(half, free)} over free (target 25%)")
    if row["half_off"].get("makespan", 1e300) > 1.10 * free + EPS:
        out.append(f"{name}: at B/2 with --host-bw 1 {versus(row['half_off'], free)} over free "
                   "(target 10%)")
    q = row["quarter_rec"]
    if "none" in q and lib is not None:
        out.append(f"{name}: no plan at B/4")
    return out


def table(rows):
    lines = [
        "| profile | p | free | B: search (no mem / with mem) | B/2 recompute | vs free | "
        "B/2 --host-bw 1 | vs free | B/2 no mem actions | best lib full recompute at B/2 | "
        "B/4 recompute |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['profile']} | {r['p']} | error: {r['error']} |")
            continue
        free = r["free"].get("makespan", float("nan"))
        lib = r["half_rec"].get("best_library_recompute")
        lib_text = f"{lib['makespan']:g}" if lib else "none fits"
        bmem = r["B_mem"].get("makespan")
        bmem = f"{bmem:g}" if bmem is not None else "error"
        lines.append(
            f"| {r['profile']} | {r['p']} | {free:g} | {r['B_nomem']['makespan']:g} / {bmem} | "
            f"{cell(r['half_rec'])} | {versus(r['half_rec'], free)} | {cell(r['half_off'])} | "
            f"{versus(r['half_off'], free)} | {cell(r['half_nomem'])} | {lib_text} | "
            f"{cell(r['quarter_rec'])} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeplan", default=os.path.join(ROOT, "build", "pipeplan"))
    ap.add_argument("--time-limit", type=float, default=None,
                    help="passed to every search (default: the search's own)")
    ap.add_argument("--only", action="append", default=[],
                    help="keep rows whose 'profile p=P' contains TEXT (repeatable)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("-o", "--output", help="write the table here too")
    opts = ap.parse_args()
    rows, issues = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for p, m in SHAPES:
            for profile in PROFILES:
                name = f"{profile} p={p}"
                if opts.only and not any(t in name for t in opts.only):
                    continue
                row = measure(opts, tmp, profile, p, m)
                rows.append(row)
                found = problems(row)
                issues += found
                status = "; ".join(found) if found else f"{name}: all targets met"
                print(status, file=sys.stderr, flush=True)
    text = table(rows)
    sys.stdout.write(text)
    if opts.output:
        with open(opts.output, "w") as f:
            f.write(text)
    print(f"{len(issues)} problem(s)" + "".join("\n  " + i for i in issues), file=sys.stderr)
    return 1 if opts.check and issues else 0


if __name__ == "__main__":
    sys.exit(main())
