"""The two weight copies of a two-direction schedule sum their gradients (taskgraph/techniques/
pair_sync.py): DualPipe (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe's example adds each
copy's gradient to its twin's) and Chimera (Li & Hoefler SC21 Sec. 3.2) hold stage s on pipeline
ranks s and p-1-s; each gradient bucket, after its data-parallel reduction, is all-reduced between
them.  Closed-form bytes, the link it crosses, the direction of its cost, estimator == engine."""
from __future__ import annotations

import numpy as np
import pytest
from test_estimator import assert_agrees

from explorer.engine.records import BucketInfo
from explorer.estimate import estimate_many
from explorer.network.collectives import bus_factor
from explorer.network.groups import Network
from explorer.scenario import load, shipped_scenarios
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder
from explorer.taskgraph.techniques.optimizer import grad_reduce_bytes

BASE = shipped_scenarios()["zero-bubble-8gpu"]       # one 8-GPU H100 node, pp 8, dp 1, 1.3B model
TWO_NODES = {"cluster.nodes": 2, "cluster.gpus_per_node": 4, "cluster.scale_out.kind": "fat-tree",
             "cluster.scale_out.nics_per_node": 1}


def _reduce_bus_bytes(sc) -> tuple[np.ndarray, np.ndarray]:
    """Per stage class: bus bytes of its gradient-reduction bucket tasks (gathers left out), and
    the gradient bytes of the parameters it holds (both weight copies)."""
    b = iteration_builder(sc)
    got = np.zeros(b.p)
    for t in b.build().tasks:
        if isinstance(t.info, BucketInfo) and t.info.op != "all-gather":
            got[t.cls] += t.info.bus_bytes
    held = np.array([sum(ch.params + ch.expert_params for ch, _ in b.rank_chunks(s)) for s in range(b.p)])
    return got, held * grad_reduce_bytes(sc)


@pytest.mark.parametrize("schedule", ["dualpipe", "chimera"])
@pytest.mark.parametrize("over, want", [
    # dp 1: only the pair all-reduce over 2 ranks, 2(2-1)/2 = 1 gradient size (nccl-tests busbw).
    ({}, 2 * (2 - 1) / 2),
    # dp 2, ZeRO 0: one all-reduce over the 2 x 2 holders of the stage, 2(4-1)/4 gradient sizes
    # (the dp ring's 2(2-1)/2 plus the pair's all-reduce of the 1/2 shard between its phases).
    ({"parallelism.pp": 4, "parallelism.dp": 2}, 2 * (4 - 1) / 4),
    # dp 4, ZeRO 0: 2(8-1)/8.
    ({"parallelism.pp": 2, "parallelism.dp": 4, "training.global_batch": 32}, 2 * (8 - 1) / 8),
    # dp 2, ZeRO 1: the dp reduce-scatter (2-1)/2, then the pair all-reduces the 1/2 shard kept.
    ({"parallelism.pp": 4, "parallelism.dp": 2, "parallelism.zero": 1}, (2 - 1) / 2 + 1 / 2),
])
def test_the_stage_gradients_are_reduced_over_the_two_copies_times_dp(schedule, over, want):
    sc = load(BASE, {"parallelism.schedule": schedule, **over})
    got, grads = _reduce_bus_bytes(sc)
    np.testing.assert_allclose(got, grads * want, rtol=1e-12)
    if sc.parallelism.zero == 0:
        assert want == bus_factor("all-reduce", 2 * sc.dp)
    assert got.min() > 0                 # every rank exchanges its copies, dp 1 included


def test_the_pair_group_is_ranks_s_and_p_minus_one_minus_s():
    sc = load(BASE, {"parallelism.schedule": "dualpipe", "parallelism.pp": 4, "parallelism.dp": 2,
                     "parallelism.order": "tp-cp-dp-pp"})
    net = Network(sc)
    pl = net.placement
    for s in range(4):
        assert sorted(net.members("pair", s).tolist()) == sorted([pl.gpu(pp=s), pl.gpu(pp=3 - s)])
        assert net.group_size("pair", s) == 2
    # dp innermost on 8 GPUs of one node: stride 2 between pipeline ranks, all on NVLink.
    assert net.cost("all-reduce", 1e9, "pair", 0).boundary == net.cost("all-reduce", 1e9, "dp", 0).boundary


@pytest.mark.parametrize("schedule", ["dualpipe", "chimera"])
def test_a_slower_link_between_the_copies_exposes_more_data_parallel_time(schedule):
    """dp 1 and pipeline ranks s and 7-s on different nodes of 4 GPUs: before the pair was priced
    nothing was reduced at all (dp 0 s); now the exchange crosses the NICs and grows as they slow."""
    rows = []
    for fabric in ("ib-ndr", "eth-100", "eth-25"):
        sc = load(BASE, {"parallelism.schedule": schedule, **TWO_NODES, "cluster.scale_out.fabric": fabric})
        net = Network(sc)
        assert all(net.cost("all-reduce", 1e8, "pair", s).boundary == "scale-out" for s in range(8))
        r = simulate(sc)
        rows.append((r.breakdown_s["dp"], r.iteration_time_s))
    dp, T = zip(*rows, strict=True)
    assert 0 < dp[0] < dp[1] < dp[2]
    assert T[0] < T[1] < T[2]
    # On one node (NVLink) the same exchange is far cheaper than over 400 Gb/s InfiniBand.
    one_node = simulate(load(BASE, {"parallelism.schedule": schedule}))
    assert 0 < one_node.breakdown_s["dp"] < dp[0] / 10


def test_the_estimator_prices_the_pair_as_the_engine():
    scs = [load(BASE, {"parallelism.schedule": sch, **over})
           for sch in ("dualpipe", "chimera")
           for over in ({}, {**TWO_NODES, "cluster.scale_out.fabric": "eth-25"},
                        {"parallelism.pp": 4, "parallelism.dp": 2},
                        {"parallelism.pp": 4, "parallelism.dp": 2, "parallelism.zero": 2},
                        {"parallelism.pp": 4, "parallelism.dp": 2, "communication.dp_overlap": False})]
    assert_agrees(scs, estimate_many(scs))


def test_deepseek_v3_pays_for_its_two_copies():
    """The shipped DualPipe run (pp 16, dp 128, ZeRO-1): each rank all-reduces the 1/128 shards of
    both copies' gradients with its twin; 1F1B-style schedules have no such exchange."""
    sc = load(shipped_scenarios()["deepseek-v3"])
    got, grads = _reduce_bus_bytes(sc)
    b = iteration_builder(sc)
    net = b.net
    # Dense gradients reduce-scattered over dp, expert gradients over edp; each shard then paired.
    for s in range(b.p):
        dense = sum(ch.params for ch, _ in b.rank_chunks(s)) * grad_reduce_bytes(sc)
        expert = sum(ch.expert_params for ch, _ in b.rank_chunks(s)) * grad_reduce_bytes(sc)
        n, e = net.group_size("dp", s), net.group_size("edp", s)
        want = dense * ((n - 1) / n + 1 / n) + expert * ((e - 1) / e + 1 / e)
        assert got[s] == pytest.approx(want, rel=1e-12)
    assert got == pytest.approx(grads, rel=1e-12)      # ZeRO 1: (n-1)/n + 1/n = 1 gradient size



# -- ZeRO-3 / FSDP: each rank's accumulated gradient shard all-reduced with the twin, once a step ---

@pytest.mark.parametrize("schedule", ["dualpipe", "chimera"])
@pytest.mark.parametrize("over", [
    {},                                                                   # dp 1: the whole gradient
    {"parallelism.pp": 4, "parallelism.dp": 2},
    {"parallelism.pp": 2, "parallelism.dp": 4, "training.global_batch": 32},
])
def test_zero3_pairs_each_ranks_gradient_shard_with_the_twin(schedule, over):
    """ZeRO-3 reduce-scatters each layer inside the passes (ChunkWork.fsdp_bytes, unchanged); the
    step's bucket tasks are then only the pair all-reduce of the 1/n shard each rank accumulated, 2
    ranks: 2(2-1)/2 = 1 times its bytes (nccl-tests busbw), i.e. the held gradients / n."""
    sc = load(BASE, {"parallelism.schedule": schedule, "parallelism.zero": 3, **over})
    got, grads = _reduce_bus_bytes(sc)
    np.testing.assert_allclose(got, grads / sc.dp * bus_factor("all-reduce", 2), rtol=1e-12)
    assert got.min() > 0
    b = iteration_builder(sc)
    tasks = [t for t in b.build().tasks if isinstance(t.info, BucketInfo)]
    assert {t.info.dim for t in tasks} == {"pair"} and {t.info.group for t in tasks} == {2}
    # The layers' own gathers and reduce-scatters stay ZeRO-3's: (2 x 2 + g) (n-1)/n per parameter.
    g, n = grad_reduce_bytes(sc), sc.dp
    for s in range(b.p):
        held = sum(ch.params for ch, _ in b.rank_chunks(s))
        fsdp = sum(ch.fsdp_bytes for ch, _ in b.rank_chunks(s))
        assert fsdp == pytest.approx(held * (2 * 2 + g) * (n - 1) / n, rel=1e-12)
    # A one-direction schedule has no twin and no bucket task under ZeRO-3.
    assert _reduce_bus_bytes(load(BASE, {"parallelism.zero": 3, **over}))[0].max() == 0


@pytest.mark.parametrize("schedule", ["dualpipe", "chimera"])
def test_zero3_a_slower_link_between_the_copies_exposes_more_data_parallel_time(schedule):
    """dp 1, ZeRO-3, ranks s and 7-s on different nodes: before, no gradient left a GPU (dp 0 s);
    now each rank's gradients cross the NICs to its twin and the slower NICs expose more of it."""
    rows = []
    for fabric in ("ib-ndr", "eth-100", "eth-25"):
        sc = load(BASE, {"parallelism.schedule": schedule, "parallelism.zero": 3, **TWO_NODES,
                         "cluster.scale_out.fabric": fabric})
        r = simulate(sc)
        rows.append((r.breakdown_s["dp"], r.iteration_time_s))
    dp, T = zip(*rows, strict=True)
    assert 0 < dp[0] < dp[1] < dp[2]
    assert T[0] < T[1] < T[2]
    # dp 1: ZeRO-3 exchanges the same whole gradient once a step as ZeRO-2 does.
    z2 = simulate(load(BASE, {"parallelism.schedule": schedule, "parallelism.zero": 2, **TWO_NODES,
                              "cluster.scale_out.fabric": "eth-25"}))
    assert dp[2] == pytest.approx(z2.breakdown_s["dp"], rel=0.05)


def test_zero3_the_estimator_prices_the_pair_as_the_engine():
    scs = [load(BASE, {"parallelism.schedule": sch, "parallelism.zero": 3, **over})
           for sch in ("dualpipe", "chimera")
           for over in ({}, {**TWO_NODES, "cluster.scale_out.fabric": "eth-25"},
                        {"parallelism.pp": 4, "parallelism.dp": 2},
                        {"parallelism.pp": 4, "parallelism.dp": 2, **TWO_NODES,
                         "cluster.scale_out.fabric": "eth-100"},
                        {"parallelism.pp": 4, "parallelism.dp": 2, "communication.dp_overlap": False})]
    assert_agrees(scs, estimate_many(scs))
