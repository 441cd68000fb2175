#!/usr/bin/env python3
"""pipeplan search against sail-sg's zero-bubble schedulers on the 48-problem grid.

Reads the recorded sail-sg makespans (bench/data/sail_sg_grid.json: p 4/8, m 8/16/32,
F=I=W=1 and F=1 I=2 W=1 per rank, transfer 0 and 0.25, budgets 1x and 2x 1F1B's
peak; provenance inside), runs `pipeplan search` on each problem, verifies the
plan it writes under all three transports, and prints a Markdown table with the
mean advantage, the plans at the search's lower bound (so optimal) and the mean
a plan at the bound on every problem would give. --retime also re-simulates each
recorded sail-sg order and checks it reproduces the recorded makespan and fits
the budget.

  scripts/sail_grid.py [--pipeplan build/pipeplan] [--time-limit S] [--only TEXT]...
                       [--retime] [--check] [-o table.md]

--check exits 1 when the search is slower than sail-sg on any problem, when a plan
does not verify or exceeds the budget, or (with --retime) when a recorded order
does not reproduce. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-9


def profile_csv(p, i):
    rows = "".join(f"l{k},0.5,{(i + 1) / 2},0.5,0.5\n" for k in range(2 * p))
    return "name,F,B,W,activation\n" + rows


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def search(binary, prob, prof, tmp, time_limit):
    plan = os.path.join(tmp, "plan.json")
    args = [binary, "search", "-p", str(prob["p"]), "-m", str(prob["m"]), "--layers", prof,
            "--memory-limit", str(prob["budget"]), "-f", "json", "-o", plan]
    if prob["transfer"]:
        args += ["--comm", str(prob["transfer"])]
    if time_limit:
        args += ["--time-limit", str(time_limit)]
    rc, out, err = run(args)
    if rc != 0:
        return dict(error=f"search exited {rc}: {err.strip()}")
    d = json.loads(out)
    vrc, _, verr = run([binary, "verify", plan, "--model", "all"])
    return dict(makespan=d["makespan"], peak=d["peak_memory"], lower_bound=d["lower_bound"],
                origin=d["origin"], time_limited=d["time_limited"], verified=vrc == 0,
                verify_error=verr.strip() if vrc else "")


def retime(binary, prob, prof, tmp):
    best = prob["best"]
    path = os.path.join(tmp, "sail.csv")
    with open(path, "w") as f:
        f.write("\n".join(best["order"]) + "\n")
    args = [binary, "simulate", path, "--lower", "--layers", prof, "-f", "json"]
    if prob["transfer"]:
        args += ["--comm", str(prob["transfer"])]
    rc, out, err = run(args)
    if rc != 0:
        return f"simulate exited {rc}: {err.strip()}"
    d = json.loads(out)
    if abs(d["makespan"] - best["makespan"]) > EPS:
        return f"re-timed makespan {d['makespan']} != recorded {best['makespan']}"
    if d["peak_memory"] > prob["budget"] + EPS:
        return f"peak {d['peak_memory']} over the budget {prob['budget']}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeplan", default=os.path.join(ROOT, "build", "pipeplan"))
    ap.add_argument("--fixture", default=os.path.join(ROOT, "bench", "data", "sail_sg_grid.json"))
    ap.add_argument("--time-limit", type=float, default=0, help="search --time-limit (default: its own)")
    ap.add_argument("--only", action="append", default=[],
                    help="keep problems whose name contains TEXT (e.g. 'p4 m8'); repeatable")
    ap.add_argument("--retime", action="store_true", help="re-simulate the recorded sail-sg orders")
    ap.add_argument("--check", action="store_true", help="exit 1 on a loss or a failed check")
    ap.add_argument("-o", "--output", help="also write the table here")
    a = ap.parse_args()

    with open(a.fixture) as f:
        fixture = json.load(f)
    if fixture.get("format") != "pipeplan.sail-sg-grid":
        sys.exit(f"{a.fixture}: not a pipeplan.sail-sg-grid fixture")
    probs = [p for p in fixture["problems"] if not a.only or any(o in p["name"] for o in a.only)]
    if not probs:
        sys.exit("no problem matches --only")

    lines = ["| problem | sail-sg best | method | search | search vs sail-sg | lower bound | search plan |",
             "|---|---|---|---|---|---|---|"]
    failures, gains, room = [], [], []
    faster = equal = slower = optimal = 0
    with tempfile.TemporaryDirectory() as tmp:
        for prob in probs:
            prof = os.path.join(tmp, f"u{prob['p']}_{prob['i']}.csv")
            with open(prof, "w") as f:
                f.write(profile_csv(prob["p"], prob["i"]))
            if a.retime:
                why = retime(a.pipeplan, prob, prof, tmp)
                if why:
                    failures.append(f"{prob['name']}: sail-sg order: {why}")
            s = search(a.pipeplan, prob, prof, tmp, a.time_limit)
            sail = prob["best"]["makespan"]
            if "error" in s:
                failures.append(f"{prob['name']}: {s['error']}")
                continue
            if not s["verified"]:
                failures.append(f"{prob['name']}: plan does not verify: {s['verify_error']}")
            if s["peak"] > prob["budget"] + EPS:
                failures.append(f"{prob['name']}: peak {s['peak']} over the budget {prob['budget']}")
            gain = (sail - s["makespan"]) / sail
            gains.append(gain)
            room.append((sail - s["lower_bound"]) / sail)  # the most any plan could gain
            optimal += s["makespan"] <= s["lower_bound"] + EPS
            if s["makespan"] < sail - EPS:
                faster += 1
            elif s["makespan"] > sail + EPS:
                slower += 1
                failures.append(f"{prob['name']}: search {s['makespan']} slower than sail-sg {sail}")
            else:
                equal += 1
            origin = s["origin"] + (" (time-limited)" if s["time_limited"] else "")
            lines.append(f"| {prob['name']} | {sail:g} | {prob['best']['method']} | {s['makespan']:g} | "
                         f"{100 * gain:+.2f}% | {s['lower_bound']:g} | {origin} |")
            print(lines[-1], flush=True)
    mean = 100 * sum(gains) / len(gains) if gains else 0.0
    bound = 100 * sum(room) / len(room) if room else 0.0
    summary = (f"{len(gains)} problems: search faster on {faster}, equal on {equal}, slower on {slower}; "
               f"mean advantage {mean:+.2f}%; at the lower bound (optimal) on {optimal}; "
               f"a plan at the bound on every problem would give {bound:+.2f}%")
    table = "\n".join(lines) + "\n\n" + summary + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(table)
    print(summary)
    for why in failures:
        print("FAIL " + why, file=sys.stderr)
    if a.check and failures:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
