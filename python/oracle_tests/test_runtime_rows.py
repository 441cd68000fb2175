"""The runtimes table (pipeplan.runtimes(), docs/semantics.md "Runtimes by name")
judged by the installed peers' own code (scripts/oracles.txt: torch 2.15.0,
megatron-core 0.16.1, deepspeed 0.19.8): each row's transport model and wait
rule follow from how that package posts and waits for its P2P operations.
"""

import inspect

from oracles import require, version_of

import pipeplan


def row(name):
    return {r.name: r for r in pipeplan.runtimes()}[name]


def test_torch_row_is_the_installed_batch_p2p():
    schedules = require("torch.distributed.pipelining.schedules")
    src = inspect.getsource(schedules._batch_p2p)
    major, minor = (int(x) for x in version_of("torch").split(".")[:2])
    # From 2.12 an all-send or all-recv list goes out as plain isend/irecv
    # (pair communicators: rendezvous); a mixed one as batch_isend_irecv.
    assert "op_types == {dist.isend}" in src and "op_types == {dist.irecv}" in src
    assert "dist.batch_isend_irecv(p2p_ops)" in src
    assert (major, minor) >= (2, 12)
    torch_row = row("torch")
    assert (torch_row.model, torch_row.waits, torch_row.groups_apart) == (
        "rendezvous", "before-use", True)
    # Receives are waited before the compute that reads them, in the runtime's step.
    runtime_src = inspect.getsource(schedules._PipelineScheduleRuntime)
    assert "_wait_batch_p2p" in runtime_src
    assert row("torch-2.11").model == "serial"


def test_megatron_rows_are_the_installed_p2p_communication():
    p2p = require("megatron.core.pipeline_parallel.p2p_communication")
    src = inspect.getsource(p2p)
    batched = inspect.getsource(p2p._batched_p2p_ops)
    single = inspect.getsource(p2p._p2p_ops)
    # batch_p2p_comm: every call, one operation included, is one batch_isend_irecv.
    assert "torch.distributed.batch_isend_irecv(ops)" in batched
    assert "batch_isend_irecv" not in single
    assert "torch.distributed.isend(" in single and "torch.distributed.irecv(" in single
    # ... waited right after the call unless overlap_p2p_comm; batched asserts it waits.
    assert "if wait_on_reqs and len(reqs) > 0:" in src
    assert "assert wait_on_reqs" in src
    assert "wait_on_reqs=(not overlap_p2p_comm)" in src
    assert (row("megatron").model, row("megatron").waits) == ("rendezvous", "at-post")
    assert (row("megatron-batched").model, row("megatron-batched").waits) == ("serial", "at-post")
    assert (row("megatron-overlap").model, row("megatron-overlap").waits) == (
        "rendezvous", "before-use")
    assert "megatron-core 0.16.1" in row("megatron").source
    assert version_of("megatron-core") in row("megatron").source


def test_deepspeed_row_is_the_installed_p2p():
    p2p = require("deepspeed.runtime.pipe.p2p")
    send, recv = inspect.getsource(p2p.send), inspect.getsource(p2p.recv)
    assert 'assert async_op == False' in send and 'assert async_op == False' in recv
    assert "dist.send(" in send and "dist.recv(" in recv
    assert (row("deepspeed").model, row("deepspeed").waits) == ("serial", "at-post")
    assert version_of("deepspeed") in row("deepspeed").source
