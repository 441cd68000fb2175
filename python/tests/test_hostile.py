"""The module under hostile use (issue 25): objects built through __new__ or
tampered pickles, wrong types, out-of-range values and endless inputs. Wrong
types raise TypeError (pipeplan.InputTypeError, also an InputError), bad
values pipeplan.InputError; no raw pybind11 RuntimeError, no crash."""

import collections.abc
import itertools
import math
import pickle
import subprocess
import sys

import pytest

import pipeplan

CLASSES = ["Plan", "PlanMeta", "Action", "ActionList", "Diagnostic", "SimResult", "RankStats",
           "Comparison", "ComparisonRow", "ScheduleInfo", "Layer", "LayerProfile", "SearchResult",
           "LibraryRun"]

# Every public attribute and dunder of every class, on an object made by
# __new__ alone. Run in a child: a crash must fail the test, not end pytest.
UNINITIALISED = """
import pipeplan
failures = []
for name in {classes!r}:
    cls = getattr(pipeplan, name)
    obj = cls.__new__(cls)
    probes = [n for n in dir(cls) if not n.startswith("_")]
    probes += ["__str__", "__repr__", "__len__", "__iter__", "__eq__", "__getitem__",
               "__getstate__", "__copy__"]
    for probe in probes:
        if not hasattr(cls, probe):
            continue
        try:
            value = getattr(obj, probe)
            if callable(value):
                value(*([obj] if probe == "__eq__" else [0] if probe == "__getitem__" else []))
        except TypeError:
            pass
        except Exception as e:
            failures.append(f"{{name}}.{{probe}}: {{type(e).__name__}}: {{e}}")
print("failures:", failures)
"""


def run_child(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_objects_made_by_new_refuse_instead_of_crashing():
    r = run_child(UNINITIALISED.format(classes=CLASSES))
    assert r.returncode == 0, r.stderr
    assert "failures: []" in r.stdout, r.stdout
    for name in ("Plan", "SimResult"):
        obj = getattr(pipeplan, name).__new__(getattr(pipeplan, name))
        with pytest.raises(TypeError, match="never initialised"):
            len(obj) if name == "Plan" else obj.makespan


def test_tampered_pickles_are_named_errors():
    tampered = pickle.dumps(pipeplan.Action("0F0")).replace(b"0F0", b"XYZ")
    with pytest.raises(pipeplan.InputError, match="unknown action 'XYZ'"):
        pickle.loads(tampered)
    with pytest.raises(pipeplan.InputError, match="unknown action 'not an action'"):
        pipeplan.Action.__new__(pipeplan.Action).__setstate__(("not an action",))
    for state in [(5,), (), ("a", "b"), "not a tuple"]:
        with pytest.raises(TypeError, match=r"Plan.__setstate__ expects \(str,\)"):
            pipeplan.Plan.__new__(pipeplan.Plan).__setstate__(state)
    plan = pipeplan.plan("1f1b", 2, 2)
    broken = pickle.dumps(plan).replace(b"pipeplan.plan", b"pipeplan.nope")
    with pytest.raises(pipeplan.InputError, match="<pickle>: format"):
        pickle.loads(broken)
    assert pickle.loads(pickle.dumps(plan)) == plan


@pytest.mark.parametrize("call,message", [
    (lambda: pipeplan.plan("gpipe", True, 8), "pp_degree must be an int, got bool"),
    (lambda: pipeplan.plan("gpipe", 4.0, 8), "pp_degree must be an int, got float"),
    (lambda: pipeplan.plan("1f1b", 4, 8, rank=True), "rank must be an int, got bool"),
    (lambda: pipeplan.plan("1f1b", 4, 8, prefetch=True), "prefetch must be an int"),
    (lambda: pipeplan.simulate("1f1b"), "plan must be a pipeplan.Plan, got str"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), cost={"F": "1,B=100"}),
     r"cost\[F\] must be a number, got str"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), comm=("1,5",)),
     "comm latency must be a number, got str"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), bytes=True), "bytes must be a number"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), stage_costs={True: 2.0}),
     "stage_costs key must be an int"),
    (lambda: pipeplan.from_torch({"0": ["0F0"]}), r"order's keys must be ranks \(int\)"),
    (lambda: pipeplan.from_torch("0F0"), "order must map rank -> list of actions"),
    (lambda: pipeplan.compare(2, 4, stages_per_rank=False), "stages_per_rank must be an int"),
    (lambda: pipeplan.search([("a", 1, 2, 1, 1)] * 4, 2, 4, time_limit=True),
     "time_limit must be a number, got bool"),
    (lambda: pipeplan.read_layers([("a", True, 2, 1, 1)]), r"layers\[0\].F must be a number"),
    # Flags take True or False only (as the CLI's take no value); lowering a str or None.
    (lambda: pipeplan.plan("1f1b", 2, 2, batch_p2p=1), "batch_p2p must be a bool, got int"),
    (lambda: pipeplan.plan("1f1b", 2, 2, batch_p2p="yes"), "batch_p2p must be a bool, got str"),
    (lambda: pipeplan.plan("1f1b", 2, 2, serial_safe=0), "serial_safe must be a bool, got int"),
    (lambda: pipeplan.plan("1f1b", 2, 2, lowering=1), "lowering must be a str or None, got int"),
    (lambda: pipeplan.lower(pipeplan.plan("1f1b", 2, 2, compute_only=True), lowering=b"seed"),
     "lowering must be a str or None, got bytes"),
    (lambda: pipeplan.compare(2, 4, batch_p2p=1), "batch_p2p must be a bool, got int"),
    (lambda: pipeplan.search([("a", 1, 2, 1, 1)] * 4, 2, 4, offload=1),
     "offload must be a bool, got int"),
    (lambda: pipeplan.search([("a", 1, 2, 1, 1)] * 4, 2, 4, recompute="no"),
     "recompute must be a bool, got str"),
    (lambda: pipeplan.Action(7), "Action\\(\\) takes an action string, got int"),
    (lambda: pipeplan.plan("1f1b", 4, 8).meta.rank_of("1"), "stage must be an int, got str"),
])
def test_wrong_types_are_type_errors(call, message):
    with pytest.raises(TypeError, match=message) as info:
        call()
    assert isinstance(info.value, pipeplan.InputError)  # bad input, exit 2 in the CLI


@pytest.mark.parametrize("call,message", [
    (lambda: pipeplan.from_torch({2**63: ["0F0"]}), "order's rank must be in 0..65535"),
    (lambda: pipeplan.plan("1f1b", 4, 8, prefetch=2**63), r"prefetch must be in 0..1073741824"),
    (lambda: pipeplan.plan("1f1b", 2**70, 8), "pp_degree must be in 1..65536"),
    (lambda: pipeplan.plan("1f1b", 4, 8, rank=-1), r"rank -1 is out of range for pp_degree 4"),
    (lambda: pipeplan.plan("1f1b", 4, 8).meta.rank_of(-5), r"stage must be in 0..3, got -5"),
    (lambda: pipeplan.plan("1f1b", 4, 8).meta.stages_of(10**6), r"rank must be in 0..3"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), stage_costs={0: math.nan}),
     r"stage_costs\[0\] nan is not a finite number"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), cost={"F": math.inf}),
     r"cost\[F\] inf is not a finite number"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), bytes=10**400),
     "bytes .* is not a finite number"),
    (lambda: pipeplan.simulate(pipeplan.plan("1f1b", 2, 2), lower=True, compute_only=True),
     "give lower=True or compute_only=True, not both"),
    (lambda: pipeplan.read("/etc/hostname\x00junk"), "the path holds a NUL byte"),
    # Limits hold while iterating: an endless order stops at 65536 ranks (or
    # 2^25 entries), not at a MemoryError.
    (lambda: pipeplan.from_torch(itertools.repeat([])), "more than the supported 65536 ranks"),
    (lambda: pipeplan.loads("0F0,0B0\n", schedule=""), "schedule: must not be empty"),
])
def test_bad_values_are_input_errors(call, message):
    with pytest.raises(pipeplan.InputError, match=message):
        call()


def test_quoted_text_is_capped():
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.verify(pipeplan.plan("1f1b", 2, 2), transport="x" * 10000)
    assert len(str(info.value)) < 300 and "(10000 bytes)" in str(info.value)
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.read_layers([("n" * 100000, 1, 2, 3, 1)])
    assert len(str(info.value)) < 400
    with pytest.raises(pipeplan.InputError) as info:
        pipeplan.from_torch({2 * k: [] for k in range(20000)})
    assert len(str(info.value)) < 300 and "(20000 ranks)" in str(info.value)


def test_no_pybind11_runtime_error_escapes():
    # Every positional argument of the main entry points, given junk.
    plan = pipeplan.plan("1f1b", 2, 2)
    junk = [None, object(), b"bytes", 1.5, True, -1, 2**80, "", [None], {"x": 1}]
    calls = [
        lambda x: pipeplan.plan("1f1b", x, 2), lambda x: pipeplan.plan("1f1b", 2, x),
        lambda x: pipeplan.plan(x, 2, 2), lambda x: pipeplan.lower(x),
        lambda x: pipeplan.verify(x), lambda x: pipeplan.verify(plan, x),
        lambda x: pipeplan.simulate(x), lambda x: pipeplan.simulate(plan, cost=x),
        lambda x: pipeplan.simulate(plan, comm=x), lambda x: pipeplan.simulate(plan, stage_costs=x),
        lambda x: pipeplan.simulate(plan, layers=x), lambda x: pipeplan.compare(x, 4),
        lambda x: pipeplan.loads(x), lambda x: pipeplan.read(x), lambda x: pipeplan.from_torch(x),
        lambda x: pipeplan.from_torch({0: x}), lambda x: pipeplan.read_layers(x),
        lambda x: pipeplan.to_torch_csv(x), lambda x: plan.rank(x), lambda x: plan.ranks[0][x],
        lambda x: plan.meta.rank_of(x), lambda x: plan.meta[x],
    ]
    for call in calls:
        for x in junk:
            try:
                call(x)
            except (pipeplan.Error, TypeError, IndexError, KeyError):
                pass
            except Exception as e:  # a RuntimeError, SystemError, OverflowError ...
                pytest.fail(f"{type(e).__name__}: {e} for {x!r}")


def test_ranks_are_lazy_sequences():
    plan = pipeplan.plan("1f1b", 4, 8)
    ranks = plan.ranks
    first = ranks[0]
    assert isinstance(first, pipeplan.ActionList) and isinstance(first, collections.abc.Sequence)
    assert len(first) == len(plan.to_text().splitlines()[0].split(": ", 1)[1].split())
    assert first[0] == "0F0" and first[-1] == first[len(first) - 1]
    assert first[:3] == ["0F0", "0SEND_F0", "0F1"] and isinstance(first[:3], list)
    assert [str(a) for a in first[::20]] == [str(a) for a in list(first)[::20]]
    assert list(first) == first and first == [str(a) for a in first] and first != ranks[1]
    assert "0F1" in first and pipeplan.Action("3F0") not in first
    with pytest.raises(IndexError):
        first[len(first)]
    assert plan.rank(2) == ranks[2] and repr(first).startswith("[Action('0F0')")
    del plan  # the list keeps its plan alive
    assert str(first[1]) == "0SEND_F0"
