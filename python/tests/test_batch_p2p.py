"""Batched P2P groups from Python: planned (batch_p2p=), lowered, verified,
simulated and drawn, as the CLI's --batch-p2p and pipeplan show/render."""

import pytest

import pipeplan

# Megatron-LM's 1F1B at p=2, m=2 with batch_p2p_comm: each rank posts a send
# together with the receive of the opposite direction it meets.
MEGATRON = ("0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1B0,(1SEND_B0;1RECV_F1)BATCH_P2P,1F1,1B1,1SEND_B1\n")
BATCHED = [
    "0F0 0SEND_F0 0F1 (0RECV_B0;0SEND_F1)BATCH_P2P 0B0 0RECV_B1 0B1",
    "1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1",
]


def cells(plan):
    return [line.split(": ", 1)[1] for line in plan.to_text().splitlines()]


def test_plan_and_lower_with_batch_p2p():
    p = pipeplan.plan("1f1b", 2, 2, batch_p2p=True)
    assert cells(p) == BATCHED
    assert [a.batch_next for a in p.ranks[0][3:5]] == [True, False]
    compute = pipeplan.plan("1f1b", 2, 2, compute_only=True)
    assert pipeplan.lower(compute, batch_p2p=True) == p
    for t in ("rendezvous", "serial", "eager"):
        assert pipeplan.verify(p, t) == []
    # Interleaved: groups on every rank, still proved.
    q = pipeplan.plan("interleaved-1f1b", 4, 8, batch_p2p=True)
    assert all(any(a.batch_next for a in r) for r in q.ranks)
    for t in ("rendezvous", "serial", "eager"):
        pipeplan.check(q, t)
    with pytest.raises(pipeplan.InputError, match="latency-hiding"):
        pipeplan.plan("zbv", 2, 4, batch_p2p=True, lowering="latency-hiding")
    with pytest.raises(pipeplan.InputError, match="prefetch"):
        pipeplan.lower(pipeplan.plan("zbv", 2, 4, compute_only=True), batch_p2p=True, prefetch=1)


def test_grouped_plans_read_verify_and_write():
    p = pipeplan.loads(MEGATRON)
    assert p.to_csv() == MEGATRON
    assert pipeplan.loads(p.to_json()) == p
    # The verifier sees every member (counts, pairs, dependencies).
    assert pipeplan.verify(p, "eager") == []
    broken = pipeplan.loads(MEGATRON.replace("(1SEND_B0;1RECV_F1)BATCH_P2P", "1RECV_F1"))
    codes = {d.code for d in pipeplan.verify(broken, "eager")}
    assert codes and "bad-group" not in codes


def test_simulate_and_draw_a_batched_plan():
    p = pipeplan.plan("1f1b", 4, 8, batch_p2p=True)
    s = pipeplan.simulate(p)
    assert s.makespan > 0
    svg = s.to_svg()
    assert "BATCH_P2P group</text>" in svg
    assert "<title>(1RECV_B0;1SEND_F2)BATCH_P2P " in svg or "BATCH_P2P " in svg
    trace = s.to_chrome_trace()
    assert '"cat":"BATCH_P2P"' in trace


def test_compare_with_batch_p2p():
    c = pipeplan.compare(4, 8, schedules=["1f1b", "interleaved-1f1b"], batch_p2p=True)
    assert c.best is not None
    with pytest.raises(pipeplan.InputError, match="latency-hiding"):
        pipeplan.compare(4, 8, schedules=["1f1b"], batch_p2p=True, lowering="latency-hiding")
