"""Python module vs CLI on the reference plan (docs/python.md, "Cost").

Times, best of --repeat runs, on interleaved-1f1b p=64 m=512 v=4 (784,384
actions with comms):

  cli plan        `pipeplan plan -s interleaved-1f1b -p 64 -m 512 -v 4 -f json -o /dev/null`
                  (plan, lower, verify under rendezvous, write JSON; one process)
  py plan+verify  pipeplan.plan(...) then pipeplan.verify(plan)
  py +to_json     the same, then plan.to_json() (the CLI's whole job)
  cli verify      `pipeplan verify FILE.json` (read, verify, report)
  py read+verify  pipeplan.read(FILE.json) then pipeplan.verify(plan)

Run:  PYTHONPATH=build/python python3 python/bench/bench_python.py --cli build/pipeplan
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import pipeplan


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/pipeplan", help="the pipeplan binary")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--schedule", default="interleaved-1f1b")
    ap.add_argument("-p", type=int, default=64)
    ap.add_argument("-m", type=int, default=512)
    ap.add_argument("-v", type=int, default=4)
    args = ap.parse_args()
    shape = (args.schedule, args.p, args.m, args.v)
    cli_shape = ["-s", args.schedule, "-p", str(args.p), "-m", str(args.m), "-v", str(args.v)]

    def run(*cmd):
        subprocess.run([args.cli, *cmd], check=True, stdout=subprocess.DEVNULL)

    plan = pipeplan.plan(*shape)
    n = plan.num_actions
    assert pipeplan.verify(plan) == []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.json")
        with open(path, "w") as f:
            f.write(plan.to_json())
        rows = [
            ("cli plan (plan+lower+verify+json)", best(lambda: run("plan", *cli_shape, "-f", "json", "-o", os.devnull), args.repeat)),
            ("py plan()+verify()", best(lambda: pipeplan.verify(pipeplan.plan(*shape)), args.repeat)),
            ("py plan()+verify()+to_json()", best(lambda: _plan_verify_json(shape), args.repeat)),
            ("cli verify FILE.json", best(lambda: run("verify", path), args.repeat)),
            ("py read(FILE.json)+verify()", best(lambda: pipeplan.verify(pipeplan.read(path)), args.repeat)),
            ("py plan.ranks (all Action objects)", best(lambda: plan.ranks, args.repeat)),
        ]
    print("%s p=%d m=%d v=%d: %d actions; best of %d runs; python %s" % (
        args.schedule, args.p, args.m, args.v, n, args.repeat, sys.version.split()[0]))
    for name, seconds in rows:
        print("%-38s %7.3f s" % (name, seconds))
    print("ratio plan+verify: py/cli = %.2f (py with to_json: %.2f); verify file: py/cli = %.2f" % (
        rows[1][1] / rows[0][1], rows[2][1] / rows[0][1], rows[4][1] / rows[3][1]))


def _plan_verify_json(shape):
    plan = pipeplan.plan(*shape)
    assert pipeplan.verify(plan) == []
    return plan.to_json()


if __name__ == "__main__":
    main()
