#!/usr/bin/env python3
"""The hostile run of docs/robustness.md: every subcommand, option, reader and
the Python module, as an attacker would. Classifies each case: ok, crash
(signal), hang (over the wall limit), exit 3, wrong exit code, over 2 GB /
30 s, unclear message (none, over 2000 bytes, control characters, C++
frames); prints the counts, then every case that is not ok.

Usage: scripts/hostile.py [PIPEPLAN_BINARY [PYTHON_PACKAGE_DIR]]
(defaults: build/pipeplan, build/python). Takes several minutes; needs
/usr/bin/time. Writes its inputs to a temporary folder it leaves behind."""
import json
import os
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "pipeplan")
PYPATH = sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, "build", "python")
D = tempfile.mkdtemp(prefix="hostile-")
WALL = 60          # a hang
SLOW = 30          # "over 30 s"
MEM_KB = 2 << 20   # "over 2 GB"

def f(name, text, mode="w"):
    path = os.path.join(D, name)
    with open(path, mode) as fh:
        fh.write(text)
    return path

cases = []  # (label, argv, stdin, allowed exit codes)
def case(label, argv, allowed=(2,), stdin=None):
    cases.append((label, [str(a) for a in argv], stdin, set(allowed)))

# ---------- inputs
plan_json = subprocess.run([P, "plan", "-s", "1f1b", "-p", "2", "-m", "2"], capture_output=True, text=True).stdout
compute_json = subprocess.run([P, "plan", "-s", "1f1b", "-p", "2", "-m", "2", "--compute-only"], capture_output=True, text=True).stdout
good_plan = f("good.json", plan_json)
good_compute = f("compute.json", compute_json)
deep = lambda n: "[" * n + "]" * n
layers = os.path.join(SRC, "examples/layers/gpt50.csv")
tiny = os.path.join(SRC, "examples/layers/tiny4.csv")
trace_rec = "[1, 0, 0, \"0F0\", 0, 1, 0, 0, 0]"
def trace_doc(plan=plan_json, records=trace_rec, extra=""):
    return '{"format": "pipeplan.trace", "version": 1, %s"plan": %s, "records": [%s]}' % (extra, plan, records)

hostile_plans = {
    "deep100k": '{"x": %s}' % deep(100000),
    "deep_in_ranks": plan_json.replace('"ranks": [', '"ranks": [%s, ' % deep(5000), 1),
    "dup_key": plan_json.replace('"version": 1,', '"version": 1, "version": 1,', 1),
    "nul": plan_json.replace("0F0", "0F\x000", 1),
    "cell3mb": "0F0," + "X" * (3 << 20) + "\n",
    "cols1e6": ",".join(["0F0"] * 1000000) + "\n",
    "empty": "",
    "garbage": "\x89PNG\r\n\x1a\n" + "\xff" * 100,
    "truncated": plan_json[: len(plan_json) // 2],
    "bigint": plan_json.replace('"pp_degree": 2', '"pp_degree": 1' + "0" * 40, 1),
    "negative": plan_json.replace('"num_microbatches": 2', '"num_microbatches": -2', 1),
    "esc_schedule": plan_json.replace('"schedule": "1f1b"', '"schedule": "\\u001b[2J\\rok"', 1),
    "long_schedule": plan_json.replace('"schedule": "1f1b"', '"schedule": "%s"' % ("S" * 10000), 1),
    "huge_shape": '{"format": "pipeplan.plan", "version": 1, "schedule": "c", "pp_degree": 2, "num_microbatches": 1048576, "stages_per_rank": 2, "stage_to_rank": "loop", "compute_only": true, "ranks": [{"rank": 0, "actions": ["0F0"]}]}',
    "stage_overflow_csv": "0B2147483647\n",
    "action_big_stage": "4147483SEND_B7\n",
    "bom_json": "\ufeff" + plan_json,
    "csv_empty_rank": "0F0,0B0\n\"\"\n",
}
plan_files = {k: f("plan_" + k + (".csv" if k.endswith("csv") or k in ("cell3mb", "cols1e6") else ".json"), v) for k, v in hostile_plans.items()}
for k, path in plan_files.items():
    ok = {"empty": (2,), "huge_shape": (1, 2), "csv_empty_rank": (0, 1, 2), "esc_schedule": (0, 1, 2), "long_schedule": (0, 1, 2), "bom_json": (0, 1, 2)}.get(k, (1, 2))
    for cmd in (["verify"], ["show"], ["convert", "-f", "json"], ["lower"], ["simulate"], ["render", "--text"]):
        # convert never judges a plan and show draws one anyway (exit 0)
        allowed = set(ok) | ({0} if cmd[0] in ("show", "convert") and k != "empty" else set())
        case(f"file {k} {cmd[0]}", [P, *cmd, path], allowed)

# traces
traces = {
    "deep_plan": trace_doc(plan_json.replace('"ranks": [', '"x": %s, "ranks": [' % deep(100000), 1)),
    "deep_records": trace_doc(records=deep(100000)),
    "dup_source": trace_doc(extra='"source": "a", "source": "b", '),
    "huge_step": trace_doc(records="[1073741824, 0, 0, \"0F0\", 0, 1, 0, 0, 0]"),
    "huge_time": trace_doc(records="[1, 0, 0, \"0F0\", -1e308, 1e308, 0, 0, 0]"),
    "huge_index": trace_doc(records="[1, 0, 4294967296, \"0F0\", 0, 1, 0, 0, 0]"),
    "long_action": trace_doc(records="[1, 0, 0, \"%s\", 0, 1, 0, 0, 0]" % ("Q" * (1 << 20))),
    "nan_time": trace_doc(records="[1, 0, 0, \"0F0\", NaN, 1, 0, 0, 0]"),
    "wrong_plan": trace_doc(plan='{"format": 1}'),
    "chrome_no_records": '{"traceEvents": []}',
    "not_object": "[1, 2, 3]",
    "esc_schedule": trace_doc(plan=hostile_plans["esc_schedule"]),
    "empty": "",
}
for k, v in traces.items():
    path = f("trace_" + k + ".json", v)
    case(f"trace {k} calibrate", [P, "calibrate", path], (2,))
    case(f"trace {k} render", [P, "render", "--trace", path, "--text"], (2,))

# stage costs
costs = {
    "dup_scale": '{"stages": [{"stage": 0, "scale": 2, "scale": 3}]}',
    "dup_stages": '{"stages": [{"stage": 0}], "stages": [{"stage": 1}]}',
    "deep": '{"stages": [], "x": %s}' % deep(100000),
    "nan": '{"stages": [{"stage": 0, "scale": NaN}]}',
    "huge": "0,1e308\n",
    "negative": "0,-1\n",
    "stage_overflow": "99999999999,1\n",
    "long_key": '{"stages": [{"stage": 0, "%s": 1}]}' % ("k" * 10000),
    "esc_key": '{"stages": [{"stage": 0, "\\u001b[2J": 1}]}',
    "calibrated_huge": '{"absolute": true, "calibrated_from": {"stages_per_rank": 4}, "stages": [{"stage": 0, "F": 5e11, "B": 5e11, "I": 2.5e11, "W": 2.5e11}, {"stage": 1, "F": 5e11, "B": 5e11, "I": 2.5e11, "W": 2.5e11}]}',
    "garbage": "\xff\xfe\x00",
    "fields": "0,1,2\n",
}
for k, v in costs.items():
    path = f("costs_" + k + (".json" if v.startswith("{") else ".csv"), v)
    ok = (0, 2) if k == "calibrated_huge" else (2,)  # per stage within the limit; compare's v > 1 too
    case(f"costs {k} simulate", [P, "simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", path], ok)
    case(f"costs {k} compare", [P, "compare", "-p", "2", "-m", "4", "--stage-costs", path], ok)
    case(f"costs {k} plan", [P, "plan", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", path], ok)

# layer profiles
profiles = {
    "nan": "name,F,B,W,activation\na,nan,1,0,1\nb,1,2,1,1\n",
    "w_over_b": "name,F,B,W,activation\na,1,1,2,1\nb,1,2,1,1\n",
    "no_header": "a,1,2,1,1\n",
    "empty": "",
    "huge": "name,F,B,W,activation\na,1e300,1,0,1\nb,1,2,1,1\n",
    "long_name": "name,F,B,W,activation\n%s,1,2,1,1\nb,1,2,1,1\n" % ("n" * 100000),
    "cols": "name,F,B,W,activation\n" + "a," * 100000 + "\n",
    "one_layer": "name,F,B,W,activation\na,1,2,1,1\n",
}
for k, v in profiles.items():
    path = f("layers_" + k + ".csv", v)
    for cmd in (["search", "-p", "2", "-m", "4", "--time-limit", "1"], ["compare", "-p", "2", "-m", "4"],
                ["simulate", "-s", "1f1b", "-p", "2", "-m", "4"], ["plan", "-s", "1f1b", "-p", "2", "-m", "4"],
                ["lower", good_compute]):
        case(f"layers {k} {cmd[0]}", [P, *cmd, "--layers", path], (0, 2) if k == "long_name" else (2,))
case("layers missing plan", [P, "plan", "-s", "1f1b", "-p", "2", "-m", "4", "--layers", "/nonexistent.csv"])
case("layers missing lower", [P, "lower", good_compute, "--layers", "/nonexistent.csv"])

# ---------- numeric options
bad_numbers = ["nan", "inf", "-inf", "-1", "1e308", "99999999999999999999", "abc", "1e", "0x10", ""]
svg = os.path.join(D, "out.svg")
numeric = [
    (["plan", "-s", "1f1b", "-p", "2", "-m", "2"], ["-p", "-m", "-v", "-r", "--prefetch", "--bytes"]),
    (["compare", "-p", "2", "-m", "4"], ["-p", "-m", "-v", "--prefetch", "--bytes"]),
    (["simulate", "-s", "1f1b", "-p", "2", "-m", "2"], ["-p", "-m", "-v", "--bytes", "--prefetch"]),
    (["render", "-s", "1f1b", "-p", "2", "-m", "2", "--svg", svg, "--text"], ["--columns", "--columns-per-unit", "--px-per-unit"]),
    (["search", "-p", "2", "-m", "4", "--layers", tiny], ["-p", "-m", "--memory-limit", "--time-limit", "--max-v", "--bytes"]),
    (["bench", "--search", os.path.join(SRC, "examples/layers")], ["--budgets", "--comm", "--time-limit"]),
    (["bench", "-s", "1f1b"], ["-p", "-m", "--repeat", "--min-time"]),
    (["train"], ["--nproc", "--steps", "--batch", "--lr", "--timeout", "--dp", "--width", "--warn-after"]),
    (["verify", good_plan], ["-m"]),
    (["lower", good_compute], ["-m", "--prefetch"]),
]
for base, opts in numeric:
    for opt in opts:
        for value in bad_numbers:
            allowed = (2,)
            if value == "-1" and opt in ("-r",):
                allowed = (2,)
            case(f"option {base[0]} {opt} {value!r}", [P, *base, opt, value], allowed)
# in range, yet refused as too large for what it does
case("train --width 8192 many stages", [P, "train", "-s", "interleaved-1f1b", "-p", "4", "-m", "8", "-v", "8", "--width", "8192"])
case("train --dp 1073741824 --nproc 4", [P, "train", "--dp", "1073741824", "--nproc", "4"])
case("render --step 0 trace", [P, "render", "--trace", f("t_good.json", trace_doc()), "--text", "--step", "0"])
case("simulate --lower --compute-only", [P, "simulate", good_compute, "--lower", "--compute-only"])
# flags that would be taken and ignored (issue 39, finding 11), and train's memory rule (7)
case("plan --batch-p2p --compute-only", [P, "plan", "-s", "1f1b", "-p", "2", "-m", "2", "--batch-p2p", "--compute-only"])
case("simulate FILE --batch-p2p", [P, "simulate", good_plan, "--batch-p2p"])
case("simulate FILE --lowering exact", [P, "simulate", good_plan, "--lowering", "exact"])
case("simulate FILE --lower --batch-p2p (comms held)", [P, "simulate", good_plan, "--lower", "--batch-p2p"])
case("train --forward-only --recompute all", [P, "train", "--forward-only", "--recompute", "all"])
case("convert -s ''", [P, "convert", f("p.csv", "0F0,0B0\n1F0,1B0\n"), "-s", "", "-f", "json"])

# ---------- strings
long = "x" * 10000
esc = "\x1b[2J\rok"
for opt, base in [("--cost", ["simulate", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("--comm", ["simulate", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("-s", ["plan", "-p", "2", "-m", "2"]),
                  ("--model", ["simulate", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("--lowering", ["plan", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("--schedules", ["compare", "-p", "2", "-m", "4"]),
                  ("--stage-costs", ["simulate", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("--runtime", ["verify", good_plan]),
                  ("--runtime", ["plan", "-s", "1f1b", "-p", "2", "-m", "2"]),
                  ("--runtime", ["convert", good_plan, "-f", "torch-csv"])]:
    for value in [long, esc, long + "=1", "F=1," + long, "F=1,F=2", "B=2,B=100", "F=" + "9" * 400, "1,2,3", "\x00"]:
        if "\x00" in value:
            continue  # no NUL in an argv
        case(f"string {opt} {value[:12]!r}", [P, *base, opt, value])
case("-o long path", [P, "plan", "-s", "1f1b", "-p", "2", "-m", "2", "-o", "/nonexistent/" + "o" * 5000])
case("-o esc path", [P, "plan", "-s", "1f1b", "-p", "2", "-m", "2", "-o", "/nonexistent/" + esc])
case("show esc clash", [P, "show", plan_files["esc_schedule"], "-s", "x"])

# ---------- issue 39 (findings 1, 2, 8, 10): stage sets, one large group, control bytes, empty values
ranges = ",".join(["0-1048575"] * 2000)
for cmd in ("plan", "simulate"):
    for opt in ("--recompute", "--offload"):
        case(f"{cmd} {opt} 2000 full ranges", [P, cmd, "-s", "1f1b", "-p", "4", "-m", "8", opt, ranges])
        case(f"{cmd} {opt} ''", [P, cmd, "-s", "1f1b", "-p", "4", "-m", "8", opt, ""])
case("simulate --host-bw ''", [P, "simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--host-bw", ""])
case("search --layout ''", [P, "search", "-p", "4", "-m", "8", "--layers", tiny, "--layout", ""])
case("train --recompute ''", [P, "train", "-s", "1f1b", "-p", "2", "-m", "2", "--recompute", ""])
group = f("group_200k.csv", "(" + ";".join(f"0SEND_F{k}" for k in range(200000)) + ";0SEND_F0)BATCH_P2P\n")
case("one group of 200k members", [P, "verify", group, "-m", "200000"])
case("esc in a group member", [P, "verify", f("esc_group.csv", "(0SEND_F0;0SEND_F" + esc + ")BATCH_P2P\n"), "-m", "1"])
case("esc in a cell", [P, "verify", f("esc_cell.csv", "0F0," + esc + "\n")])
case("esc in a layout", [P, "search", "-p", "2", "-m", "2", "--layers", tiny, "--layout", "E|t" + esc + "L"])

# ---------- resources at the documented limits
big_layers = f("layers_100k.csv", "name,F,B,W,activation\n" + "".join(f"l{i},{1 + i % 7 / 10},{2},{1},1\n" for i in range(100000)))
l65k = f("layers_65k.csv", "name,F,B,W,activation\n" + "".join(f"l{i},1,2,1,1\n" for i in range(65536)))
l10k = f("layers_10k.csv", "name,F,B,W,activation\n" + "".join(f"l{i},{1 + i % 5 / 10},{2},{1},1\n" for i in range(10000)))
res = [
    ("prefetch 2^30", [P, "plan", "-s", "interleaved-1f1b", "-p", "4", "-m", "8", "-v", "2", "--prefetch", "1073741824"], (0,)),
    ("prefetch 2^30 compare", [P, "compare", "-p", "4", "-m", "8", "--prefetch", "1073741824"], (0,)),
    ("search 10k layers", [P, "search", "-p", "8", "-m", "16", "--layers", l10k], (0,)),
    ("search 100k layers", [P, "search", "-p", "8", "-m", "16", "--layers", big_layers], (0,)),
    ("search p2048 m2048 0.5s", [P, "search", "-p", "2048", "-m", "2048", "--time-limit", "0.5", "--layers", l10k], (2,)),
    ("search p65536 m64 65k layers", [P, "search", "-p", "65536", "-m", "64", "--layers", l65k], (0, 2)),
    ("compare 10k layers", [P, "compare", "-p", "8", "-m", "16", "--layers", l10k], (0,)),
    ("timeline gpipe p65536", [P, "plan", "-s", "gpipe", "-p", "65536", "-m", "64", "-f", "timeline"], (2,)),
    ("timeline 1f1b p4096 m4096", [P, "plan", "-s", "1f1b", "-p", "1024", "-m", "4096", "-f", "timeline"], (2,)),
    ("chrome p64 m65536", [P, "render", "-s", "1f1b", "-p", "64", "-m", "65536", "--chrome-trace", os.path.join(D, "c.json")], (2,)),
    ("svg arrows p256 m4096 v4", [P, "render", "-s", "interleaved-1f1b", "-p", "256", "-m", "4096", "-v", "4", "--svg", svg, "--arrows"], (2,)),
    ("compare p2048 m2048", [P, "compare", "-p", "2048", "-m", "2048"], (0, 1)),
]
for label, argv, allowed in res:
    case("resource " + label, argv, allowed)

# ---------- Python
PY = [
    ("verify runtime 3", "pipeplan.verify(pipeplan.plan('1f1b', 2, 2), runtime=3)", "InputTypeError"),
    ("verify runtime long", "pipeplan.verify(pipeplan.plan('1f1b', 2, 2), runtime='x' * 100000)", "InputError"),
    ("verify runtime and transport", "pipeplan.verify(pipeplan.plan('1f1b', 2, 2), 'serial', 'torch')", "InputError"),
    ("to_torch_csv runtime megatron", "pipeplan.to_torch_csv(pipeplan.plan('1f1b', 2, 2), runtime='megatron')", "InputError"),
    ("plan runtime esc", "pipeplan.plan('1f1b', 2, 2, runtime='\\x1b[2J')", "InputError"),
    ("Action tampered pickle", "import pickle; a=pickle.loads(pickle.dumps(pipeplan.Action('0F0')).replace(b'0F0', b'XYZ')); str(a)", "InputError"),
    ("Action __new__ setstate", "pipeplan.Action.__new__(pipeplan.Action).__setstate__(('not an action',))", "InputError"),
    ("Plan __new__ len", "len(pipeplan.Plan.__new__(pipeplan.Plan))", "InputTypeError"),
    ("Plan setstate (5,)", "pipeplan.Plan.__new__(pipeplan.Plan).__setstate__((5,))", "InputTypeError"),
    ("Plan setstate ()", "pipeplan.Plan.__new__(pipeplan.Plan).__setstate__(())", "InputTypeError"),
    ("from_torch 2**63", "pipeplan.from_torch({2**63: ['0F0']})", "InputError"),
    ("plan prefetch 2**63", "pipeplan.plan('1f1b', 4, 8, prefetch=2**63)", "InputError"),
    ("simulate str", "pipeplan.simulate('1f1b')", "InputTypeError"),
    ("plan rank -1", "pipeplan.plan('1f1b', 4, 8, rank=-1)", "InputError"),
    ("plan bool pp", "pipeplan.plan('gpipe', True, 8)", "InputTypeError"),
    ("rank_of -5", "pipeplan.plan('1f1b', 4, 8).meta.rank_of(-5)", "InputError"),
    ("stages_of 10**6", "pipeplan.plan('1f1b', 4, 8).meta.stages_of(10**6)", "InputError"),
    ("cost injection", "pipeplan.simulate(pipeplan.plan('1f1b',2,2), cost={'F': '1,B=100'})", "InputTypeError"),
    ("stage_costs nan", "pipeplan.simulate(pipeplan.plan('1f1b',2,2), stage_costs={0: float('nan')})", "InputError"),
    ("read NUL", "pipeplan.read('%s\\x00junk')" % good_plan, "InputError"),
    ("loads schedule ''", "pipeplan.loads('0F0,0B0\\n', schedule='').to_json()", "InputError"),
    ("transport 10KB", "pipeplan.verify(pipeplan.plan('1f1b',2,2), transport='x'*10000)", "InputError"),
    ("layer name 100KB", "pipeplan.read_layers([('n'*100000, 1, 2, 3, 1)])", "InputError"),
    ("rank list 989KB", "pipeplan.from_torch({2*k: [] for k in range(100000)})", "InputError"),
    ("endless from_torch", "import itertools; pipeplan.from_torch(itertools.repeat([]))", "InputError"),
    ("plan.ranks 25M", "p=pipeplan.plan('gpipe', 65536, 64); r=p.ranks; print(len(r), len(r[0]))", None),
    ("from_torch bool key", "pipeplan.from_torch({True: ['0F0']})", "InputTypeError"),
    ("compare bool", "pipeplan.compare(True, 4)", "InputTypeError"),
    ("search bool time", "pipeplan.search('%s', 2, 4, time_limit=True)" % tiny, "InputTypeError"),
    ("search nan time", "pipeplan.search('%s', 2, 4, time_limit=float('nan'))" % tiny, "InputError"),
    ("bytes nan", "pipeplan.simulate(pipeplan.plan('1f1b',2,2), bytes=float('nan'))", "InputError"),
    ("comm injection", "pipeplan.simulate(pipeplan.plan('1f1b',2,2), comm=('1,5',))", "InputTypeError"),
    ("SimResult __new__", "pipeplan.SimResult.__new__(pipeplan.SimResult).makespan", "InputTypeError"),
    ("PlanMeta __new__", "repr(pipeplan.PlanMeta.__new__(pipeplan.PlanMeta))", "InputTypeError"),
    ("Diagnostic __new__", "str(pipeplan.Diagnostic.__new__(pipeplan.Diagnostic))", "InputTypeError"),
    ("LayerProfile __new__", "len(pipeplan.LayerProfile.__new__(pipeplan.LayerProfile))", "InputTypeError"),
    ("Comparison __new__", "list(pipeplan.Comparison.__new__(pipeplan.Comparison))", "InputTypeError"),
    ("ActionList __new__", "len(pipeplan.ActionList.__new__(pipeplan.ActionList))", "InputTypeError"),
    ("timeline p16384", "pipeplan.plan('gpipe', 16384, 4).timeline()", "InputError"),
    ("to_chrome_trace big", "pipeplan.simulate(pipeplan.plan('1f1b', 16, 40000, compute_only=True)).to_chrome_trace()", "InputError"),
    ("Action int", "pipeplan.Action(5)", "InputTypeError"),
    ("balanced_partition 0", "pipeplan.read_layers('%s').balanced_partition(0)" % tiny, "InputError"),
    ("layers bool", "pipeplan.read_layers([('a', True, 2, 1, 1)])", "InputTypeError"),
    ("LayerProfile index 2**80", "pipeplan.read_layers('%s')[2**80]" % tiny, "InputError"),
    ("plan float v", "pipeplan.plan('interleaved-1f1b', 2, 4, stages_per_rank=2.0)", "InputTypeError"),
    ("recompute 2000 full ranges", "pipeplan.plan('1f1b', 4, 8, recompute=','.join(['0-1048575'] * 2000))", "InputError"),
]

def classify_cli(label, argv, stdin, allowed):
    start = time.time()
    cmd = ["/usr/bin/time", "-f", "__RSS %M", *argv]
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=WALL)
    except subprocess.TimeoutExpired:
        return "hang", WALL, 0, ""
    wall = time.time() - start
    err = r.stderr.decode("utf-8", "replace")
    rss = 0
    if "__RSS " in err:
        rss = int(err.rsplit("__RSS ", 1)[1].split()[0])
        err = err.rsplit("__RSS ", 1)[0]
    err = "\n".join(l for l in err.splitlines() if not l.startswith("Command exited with") and not l.startswith("Command terminated"))
    code = r.returncode
    if "Command terminated by signal" in r.stderr.decode("utf-8", "replace") or code >= 128 or code < 0:
        return "crash", wall, rss, err
    if rss > MEM_KB or wall > SLOW:
        return "over", wall, rss, err
    if code == 3:
        return "exit3", wall, rss, err
    if code not in allowed:
        return "wrong-exit(%d)" % code, wall, rss, err
    if code == 2:  # exit 1 lists diagnostics, on stdout for verify
        text = err.strip()
        if not text or len(text) > 2000 or any(ord(c) < 32 and c not in "\n\t" for c in text) or "what():" in text or "terminate called" in text:
            return "unclear", wall, rss, err
    return "ok", wall, rss, err

def classify_py(label, code, expected):
    prog = ("import sys; sys.path.insert(0, %r); import pipeplan\ntry:\n" % PYPATH +
            "\n".join("    " + l for l in code.split("\n")) +
            "\nexcept Exception as e:\n    print('EXC', type(e).__name__, str(e)[:3000]); sys.exit(9)\n")
    start = time.time()
    try:
        r = subprocess.run(["/usr/bin/time", "-f", "__RSS %M", "/usr/bin/python3", "-c", prog], capture_output=True, text=True, timeout=WALL)
    except subprocess.TimeoutExpired:
        return "hang", WALL, 0, ""
    wall = time.time() - start
    rss = int(r.stderr.rsplit("__RSS ", 1)[1].split()[0]) if "__RSS " in r.stderr else 0
    if "terminated by signal" in r.stderr:
        return "crash", wall, rss, r.stderr[-300:]
    if rss > MEM_KB or wall > SLOW:
        return "over", wall, rss, r.stdout[-200:]
    out = r.stdout
    if expected is None:
        return ("ok" if r.returncode == 0 else "wrong-exc"), wall, rss, out[-300:]
    if not out.startswith("EXC "):
        return "wrong-exc(none)", wall, rss, out[-300:]
    name = out.split()[1]
    msg = out.split(" ", 2)[2] if len(out.split(" ", 2)) > 2 else ""
    if name in ("RuntimeError", "SystemError", "IndexError", "OverflowError", "AttributeError"):
        return "wrong-exc(%s)" % name, wall, rss, out[:300]
    if expected == "InputTypeError" and name != "InputTypeError":
        return "wrong-exc(%s)" % name, wall, rss, out[:300]
    if expected == "InputError" and name not in ("InputError", "ShapeError", "BudgetError"):
        return "wrong-exc(%s)" % name, wall, rss, out[:300]
    if len(msg) > 2000 or any(ord(c) < 32 and c not in "\n\t" for c in msg.rstrip("\n")):
        return "unclear", wall, rss, out[:300]
    return "ok", wall, rss, out[:200]

results = []
for label, argv, stdin, allowed in cases:
    results.append((label,) + classify_cli(label, argv, stdin, allowed))
for label, code, expected in PY:
    results.append(("python " + label,) + classify_py(label, code, expected))

from collections import Counter
counts = Counter(r[1].split("(")[0] for r in results)
print(json.dumps({"cases": len(results), **counts}, indent=None))
slowest = sorted(results, key=lambda r: -r[2])[:8]
print("slowest:", [(r[0], round(r[2], 2), r[3] // 1024) for r in slowest])
print("largest RSS:", [(r[0], r[3] // 1024) for r in sorted(results, key=lambda r: -r[3])[:5]])
for r in results:
    if r[1] != "ok":
        print(r[1], "|", r[0], "|", round(r[2], 2), "s", r[3] // 1024, "MB |", r[4].strip()[:300].replace("\n", " / "))
