"""Direction tests for training.sync: each field moves the amortised time per step the way the
window's physics says (explorer/variants/lowcomm/window.py), on Llama 3 70B across two datacenters with a
slow WAN so the synchronisation matters.  tests/test_controls.py collects ``COVERED``; the closed
forms are in tests/test_lowcomm.py."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

TWO_DC = ROOT / "scenarios" / "two-datacenters.yaml"
SLOW_WAN = {"cluster.scale_across.bandwidth_Gbps": 10}


def _step(**sync) -> float:
    over = {**SLOW_WAN, **{f"training.sync.{k}": v for k, v in sync.items()}}
    return simulate(load(TWO_DC, over)).time_per_step_s


def test_synchronising_less_often_is_faster_over_a_slow_wan():
    """kind: every-step > local-sgd (H = 100) and diloco adds its outer update (more HBM work)."""
    every = _step()
    local = _step(kind="local-sgd")
    diloco = _step(kind="diloco")
    assert local < every and local < diloco < every
    assert _step(kind="independent") < local


def test_more_inner_steps_between_syncs_is_faster():
    """inner_steps: 10 > 100 > 1000 (the sync amortised over more steps)."""
    assert _step(kind="diloco", inner_steps=10) > _step(kind="diloco", inner_steps=100) \
        > _step(kind="diloco", inner_steps=1000)


def test_more_fragments_expose_less():
    """fragments (streaming, tau = 1, a fragment slower than a step): 1 > 4 > 16."""
    assert _step(kind="streaming-diloco", fragments=1) > _step(kind="streaming-diloco", fragments=4) \
        > _step(kind="streaming-diloco", fragments=16)


def test_more_overlap_exposes_less():
    """overlap_steps: 0 (blocking) > 1 > 4 with 4 fragments over a 10 Gb/s WAN."""
    assert _step(kind="streaming-diloco", fragments=4, overlap_steps=0) \
        > _step(kind="streaming-diloco", fragments=4, overlap_steps=1) \
        > _step(kind="streaming-diloco", fragments=4, overlap_steps=4)


def test_fewer_outer_bits_are_faster():
    """outer_dtype: fp32 > bf16 > fp8 > int4 (the WAN payload per parameter)."""
    times = [_step(kind="diloco", outer_dtype=d) for d in ("fp32", "bf16", "fp8", "int4")]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4


def _dp_step(kind: str, **over) -> float:
    sets = {"cluster.datacenters": 1, "parallelism.zero": 0, "cluster.scale_out.nic_Gbps": 25,
            "parallelism.dp_kind": kind, **over}
    return simulate(load(TWO_DC, sets)).iteration_time_s


def test_dp_kinds_order_by_what_each_replica_sends():
    """dp_kind over 25 Gb/s NICs: asynchronous gossip (1 model per GPU per step) < a ring (2) < a
    torus (4) < the exponential graph (5 of 32); one parameter server (32 replicas' models through
    one NIC) slowest."""
    ring, torus, expo = (_dp_step(k) for k in ("gossip-ring", "gossip-torus", "gossip-exponential"))
    assert _dp_step("gossip-async") < ring < torus < expo < _dp_step("parameter-server")


def test_asynchronous_gossip_does_not_wait_for_a_straggler():
    """dp_kind with one GPU at half speed: the synchronous ring runs every replica at the straggler
    replica's pace (6.20 -> 7.93 s), gossip-async loses only that replica's share (5.04 -> 5.10 s)."""
    st = {"cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 2.0}
    ring, ring_st = _dp_step("gossip-ring"), _dp_step("gossip-ring", **st)
    aio, aio_st = _dp_step("gossip-async"), _dp_step("gossip-async", **st)
    assert aio < aio_st < ring < ring_st
    assert aio_st / aio < 1.02 < 1.2 < ring_st / ring


def test_more_parameter_servers_are_faster():
    """ps_servers: 1 > 4 > 32 (the replicas' traffic split over more server NICs)."""
    assert _dp_step("parameter-server", **{"parallelism.ps_servers": 1}) \
        > _dp_step("parameter-server", **{"parallelism.ps_servers": 4}) \
        > _dp_step("parameter-server", **{"parallelism.ps_servers": 32})


def test_fewer_gossip_peers_are_faster():
    """gossip_peers on the exponential graph: 0 (all 5) > 2 > 1."""
    peers = [_dp_step("gossip-exponential", **{"parallelism.gossip_peers": k}) for k in (0, 2, 1)]
    assert peers == sorted(peers, reverse=True) and len(set(peers)) == 3


def _comp_step(**comp) -> float:
    sets = {**SLOW_WAN, "training.sync.kind": "diloco", "training.sync.inner_steps": 10,
            **{f"communication.compression.{k}": v for k, v in comp.items()}}
    return simulate(load(TWO_DC, sets)).time_per_step_s


def test_compressing_the_outer_gradient_is_faster_over_a_slow_wan():
    """compression.kind on DiLoCo's sync over 10 Gb/s: none > fp16 > fp8 > 1bit."""
    times = [_comp_step(kind=k) for k in ("none", "fp16", "fp8", "1bit")]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4


def test_keeping_more_topk_entries_is_slower():
    """compression.ratio (topk): 0.001 < 0.01 < 0.1 of the entries sent."""
    assert _comp_step(kind="topk", ratio=0.001) < _comp_step(kind="topk", ratio=0.01) \
        < _comp_step(kind="topk", ratio=0.1)


def test_a_higher_powersgd_rank_is_slower():
    """compression.rank (powersgd): 1 < 8 < 64."""
    assert _comp_step(kind="powersgd", rank=1) < _comp_step(kind="powersgd", rank=8) \
        < _comp_step(kind="powersgd", rank=64)


def test_smaller_replica_groups_are_faster_on_a_slow_fabric():
    """training.sync.replica_nodes on resnet50-cloud-dp (local SGD, H = 16, no compression): groups
    of 1, 2, 4 nodes take 37.7, 73.5, 89.3 ms per step — a group of one node reduces every step
    over PCIe only; larger groups cross the 25 GbE NIC every step."""
    path = ROOT / "scenarios" / "resnet50-cloud-dp.yaml"
    over = {"communication.compression.kind": "none", "training.sync.kind": "local-sgd",
            "training.sync.inner_steps": 16}
    times = [simulate(load(path, {**over, "training.sync.replica_nodes": n})).time_per_step_s
             for n in (1, 2, 4)]
    assert times[0] < times[1] < times[2]


COVERED = {
    "training.sync.replica_nodes": "test_smaller_replica_groups_are_faster_on_a_slow_fabric",
    "communication.compression.kind": "test_compressing_the_outer_gradient_is_faster_over_a_slow_wan",
    "communication.compression.ratio": "test_keeping_more_topk_entries_is_slower",
    "communication.compression.rank": "test_a_higher_powersgd_rank_is_slower",
    "parallelism.dp_kind": "test_dp_kinds_order_by_what_each_replica_sends",
    "parallelism.ps_servers": "test_more_parameter_servers_are_faster",
    "parallelism.gossip_peers": "test_fewer_gossip_peers_are_faster",
    "training.sync.kind": "test_synchronising_less_often_is_faster_over_a_slow_wan",
    "training.sync.inner_steps": "test_more_inner_steps_between_syncs_is_faster",
    "training.sync.fragments": "test_more_fragments_expose_less",
    "training.sync.overlap_steps": "test_more_overlap_exposes_less",
    "training.sync.outer_dtype": "test_fewer_outer_bits_are_faster",
}
