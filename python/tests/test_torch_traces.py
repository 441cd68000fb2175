"""calibrate on real torch.profiler traces (torch 2.15.0, Gloo; tests/interop/torch_traces/README.md).

The traces are read as torch wrote them: `.json.gz`, torchtitan's folder
layout (profiling/traces/iteration_N/rankR_trace.json.gz), `gloo:send`/
`gloo:recv` as `user_annotation`, torch 2.15's PP:...WAIT_* spans. The
recovered costs simulate the measured step within 10%.
"""

import gzip
import json
import re

import pytest

CASES = {"gloo_1f1b_p2_m4": "1f1b", "gloo_interleaved-1f1b_p2_m4_v2": "interleaved-1f1b"}


def calibrate(cli, folder, *extra):
    r = cli.run("calibrate", folder, "-o", "-", *extra)
    assert r.returncode == 0, r.stderr
    got = re.search(r"measured step ([\d.]+) ms \(median\), simulated with these costs ([\d.]+) ms",
                    r.stderr)
    assert got, r.stderr
    return json.loads(r.stdout), float(got.group(1)), float(got.group(2))


@pytest.mark.parametrize("name", sorted(CASES))
def test_calibrate_reads_real_torch_traces_and_simulates_the_step(cli, interop_dir, name):
    folder = interop_dir / "torch_traces" / name
    costs, measured, simulated = calibrate(cli, folder, "-s", CASES[name])
    assert costs["calibrated_from"]["schedule"] == CASES[name]
    assert costs["calibrated_from"]["pp_degree"] == 2
    assert costs["calibrated_from"]["num_microbatches"] == 4
    assert abs(simulated - measured) <= 0.10 * measured, (measured, simulated)


def test_calibrate_reads_pipeplan_executors_trace_of_the_same_model(cli, interop_dir):
    # pipeplan's executor on the same tiny transformer and shapes, traced by
    # its own tracer (tests/exec/exec_transformer.cc --trace; README.md).
    trace = interop_dir / "torch_traces" / "pipeplan_exec_1f1b_p2_m4.json"
    costs, measured, simulated = calibrate(cli, trace)
    assert costs["calibrated_from"]["schedule"] == "1f1b"
    assert costs["calibrated_from"]["pp_degree"] == 2
    assert costs["calibrated_from"]["num_microbatches"] == 4
    assert abs(simulated - measured) <= 0.10 * measured, (measured, simulated)


def test_the_traces_are_as_torch_wrote_them(interop_dir):
    path = (interop_dir / "torch_traces" / "gloo_1f1b_p2_m4" / "profiling" / "traces" /
            "iteration_2" / "rank0_trace.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    cats = {(e.get("cat"), e["name"]) for e in doc["traceEvents"] if e.get("ph") == "X"}
    assert ("user_annotation", "gloo:send") in cats and ("user_annotation", "gloo:recv") in cats
    assert ("user_annotation", "PP:0WAIT_SEND_F0") in cats
    assert doc["distributedInfo"]["rank"] == 0 and doc["distributedInfo"]["backend"] == "gloo"


def test_nccl_titles_calibrate_like_gloo(cli, interop_dir, tmp_path):
    """NCCL's host ops are titled "nccl:send 0->1" / "nccl:recv 0<-1". No NCCL
    trace was recorded here: this one is the Gloo trace with its titles edited."""
    src = interop_dir / "torch_traces" / "gloo_1f1b_p2_m4"
    for r in (0, 1):
        rel = "profiling/traces/iteration_2/rank%d_trace.json.gz" % r
        text = gzip.decompress((src / rel).read_bytes()).decode()
        peer = 1 - r
        text = text.replace('"gloo:send"', '"nccl:send %d->%d"' % (r, peer))
        text = text.replace('"gloo:recv"', '"nccl:recv %d<-%d"' % (r, peer))
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(gzip.compress(text.encode()))
    assert calibrate(cli, tmp_path) == calibrate(cli, src)


def test_a_damaged_gzip_trace_is_refused(cli, tmp_path):
    data = gzip.compress(b'{"traceEvents": []}')
    (tmp_path / "rank0_trace.json.gz").write_bytes(data[: len(data) // 2])
    code, message = cli.error("calibrate", tmp_path / "rank0_trace.json.gz")
    assert code == 2 and "gzip trace" in message, message
