"""The claims of the low-communication scenarios' descriptions (issue 13.8): diloco-cross-region and
streaming-diloco-1gbps, one test per claim, each quoting its sentence.  Same conventions as
tests/test_scenario_claims.py: "about X" within a stated tolerance, directions strict."""
from __future__ import annotations

import pytest
from test_scenario_claims import about, sim

DL = "diloco-cross-region"
SD = "streaming-diloco-1gbps"
EVERY = {"training.sync.kind": "every-step"}


def test_diloco_baseline_is_wan_bound():
    """every-step: exposed DP takes 48% of the 2.90 s step and the WAN limits it at 26 GB/s."""
    r = sim(DL, EVERY)
    assert about(r.iteration_time_s, 2.90, 0.01)
    assert about(r.breakdown_s["dp"] / r.iteration_time_s, 0.48, 0.03)
    assert r.links["dp"]["tier"] == "scale-across" and about(r.links["dp"]["busbw_GBps"], 26.0, 0.03)


def test_diloco_amortises_one_sync_over_500_steps():
    """the inner step, 1.57 s, with no WAN traffic; a 1.19 s synchronisation moves 48.2 GB out of
    each region every 500 steps; 1.574 s per step amortised: 1.84x the synchronous throughput."""
    r = sim(DL)
    w = r.sync_window
    assert about(w.inner_step_s, 1.57, 0.01) and about(w.sync_s, 1.19, 0.01)
    assert about(w.wan_bytes_per_sync, 48.2e9, 0.005) and w.inner_steps == 500
    assert about(r.time_per_step_s, 1.574, 0.001)
    assert about(sim(DL, EVERY).time_per_step_s / r.time_per_step_s, 1.84, 0.01)
    inner_wan = r.bytes_per_step["scale-across"] - w.sync_bytes_per_gpu["scale-across"] / 500
    assert abs(inner_wan) < 1e-6


def test_diloco_speedup_and_law_side_by_side():
    """1.84x faster per step than synchronising every step (simulated); for 8.03B parameters and 4
    replicas 0.18 % below data-parallel's loss, reaching it with 0.962x the tokens, flagged for H."""
    w = sim(DL).sync_window
    assert about(w.speedup, 1.84, 0.01)
    assert about(w.loss["params"], 8.03e9, 0.001) and w.loss["replicas"] == 4
    assert about(w.loss["relative_loss"], -0.0018, 0.03) and about(w.loss["compute_ratio"], 0.962, 0.001)
    assert any("H = 500" in c for c in w.loss["caveats"])


def test_diloco_sync_period():
    """50 steps cost 1.60 s per step, 5 steps 1.81 s."""
    assert about(sim(DL, {"training.sync.inner_steps": 50}).time_per_step_s, 1.60, 0.005)
    assert about(sim(DL, {"training.sync.inner_steps": 5}).time_per_step_s, 1.81, 0.005)


def test_diloco_slow_wan():
    """at 10 Gb/s synchronous training collapses to 44.5 s per step, DiLoCo only slows to 1.66 s."""
    slow = {"cluster.scale_across.bandwidth_Gbps": 10}
    assert about(sim(DL, {**slow, **EVERY}).time_per_step_s, 44.5, 0.01)
    assert about(sim(DL, slow).time_per_step_s, 1.66, 0.005)


def test_diloco_memory():
    """60.5 GB per GPU in all, including the outer snapshot and momentum of the 1/64 slice.  It was
    76.0 GB at ZeRO-1 while Megatron's gradients were counted at 2 bytes; with its fp32 main_grad
    buffer (config/frameworks.py grad_buffer_in_reduce_dtype) ZeRO-1 needs 92.1 GB and does not fit,
    so the scenario shards the gradients too (ZeRO-2, the same reduce-scatter on the wire)."""
    r = sim(DL)
    assert about(r.memory.total, 60.5e9, 0.002) and not r.memory_over_capacity
    assert sim(DL, {"parallelism.zero": 1}).memory_over_capacity
    assert about(r.memory.total - sim(DL, {"training.sync.kind": "local-sgd"}).memory.total,
                 8 * r.sync_window.slice_params, 1e-9)


def test_streaming_baselines():
    """every-step: 431 s per step, 99.7% of it the gradient reduce-scatter; plain DiLoCo in fp32:
    a blocking 286 s synchronisation every 100 steps, 4.43 s per step amortised."""
    r = sim(SD, EVERY)
    assert about(r.time_per_step_s, 431, 0.01)
    assert about(r.breakdown_s["dp"] / r.iteration_time_s, 0.997, 0.002)
    d = sim(SD, {"training.sync.kind": "diloco", "training.sync.outer_dtype": "fp32"})
    assert about(d.sync_window.sync_s, 286, 0.01) and about(d.time_per_step_s, 4.43, 0.005)


def test_streaming_as_shipped():
    """1.62 s per step against an inner step of 1.58 s; each fragment needs 1.02 Gb/s to move
    within its 5 steps, so at 1 Gb/s a little (4.5 s per 100 steps) stays exposed."""
    w = sim(SD).sync_window
    assert about(w.time_per_step_s, 1.62, 0.005) and about(w.inner_step_s, 1.58, 0.005)
    assert about(w.wan_Gbps_needed, 1.02, 0.01) and about(w.exposed_sync_s, 4.5, 0.02)


def test_streaming_less_overlap_and_full_precision():
    """overlap_steps 1: 1.88 s per step; outer_dtype fp32: 4.13 s (an 8x smaller transfer in 4 bits)."""
    assert about(sim(SD, {"training.sync.overlap_steps": 1}).time_per_step_s, 1.88, 0.005)
    fp32 = sim(SD, {"training.sync.outer_dtype": "fp32"})
    assert about(fp32.time_per_step_s, 4.13, 0.005)
    assert about(fp32.sync_window.wan_bytes_per_sync / sim(SD).sync_window.wan_bytes_per_sync, 8, 1e-9)


# --------------------------------------------------------------------------- decentralised
GE, PS, CB = "gossip-exponential", "parameter-server", "cbtm-independent"


def test_gossip_one_peer_hides_the_exchange():
    """1.65 s per step; each GPU sends its 2.0 GB shard to one neighbour in 1.43 s, hidden behind
    the 1.65 s replica step."""
    r = sim(GE)
    x = r.exchange
    assert about(r.iteration_time_s, 1.65, 0.005) and about(x.step_s, 1.65, 0.005)
    assert about(x.sent, 2.0e9, 0.01) and about(x.exchange_s, 1.43, 0.01)
    assert x.exposed_s < 0.002 * r.iteration_time_s


def test_gossip_against_allreduce_and_other_graphs():
    """all-reduce 7.12 s (76% of it DP); all 5 neighbours 10 GB and 7.15 s, about as long as the
    all-reduce; ring 2.86 s; torus 5.72 s."""
    ar = sim(GE, {"parallelism.dp_kind": "allreduce"})
    assert about(ar.iteration_time_s, 7.12, 0.005)
    assert about(ar.breakdown_s["dp"] / ar.iteration_time_s, 0.76, 0.02)
    allp = sim(GE, {"parallelism.gossip_peers": 0})
    assert allp.exchange.peers == 5 and about(allp.exchange.sent, 10e9, 0.01)
    assert about(allp.iteration_time_s, 7.15, 0.005)
    assert about(allp.iteration_time_s, ar.iteration_time_s, 0.01)
    ring = sim(GE, {"parallelism.dp_kind": "gossip-ring", "parallelism.gossip_peers": 0})
    torus = sim(GE, {"parallelism.dp_kind": "gossip-torus", "parallelism.gossip_peers": 0})
    assert about(ring.iteration_time_s, 2.86, 0.005) and about(torus.iteration_time_s, 5.72, 0.005)


STRAGGLER = {"cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 2}
ASYNC = {"parallelism.dp_kind": "gossip-async"}


def test_gossip_waits_for_a_straggler():
    """one GPU at half speed stretches its replica's step to 2.82 s; every replica waits for it
    through the graph and steps every 2.82 s, 58.5% of the throughput (the all-reduce: 8.21 s)."""
    r = sim(GE, STRAGGLER)
    x = r.exchange
    assert about(x.slowest_replica_step_s, 2.82, 0.005) and about(r.iteration_time_s, 2.82, 0.005)
    assert about(x.samples_per_s / sim(GE).exchange.samples_per_s, 0.585, 0.01)
    assert about(sim(GE, {**STRAGGLER, "parallelism.dp_kind": "allreduce"}).iteration_time_s, 8.21, 0.005)


def test_async_gossip_keeps_pace_past_the_straggler():
    """alike replicas step as shipped, 1.65 s; with the straggler the 31 others keep stepping every
    1.65 s and all 32 together process 153.4 sequences per second, 98.7% of the rate without it
    (31 + 1.65/2.82 replica batches per 1.65 s): 1.67 s per global batch of 256."""
    alone = sim(GE, ASYNC)
    assert about(alone.iteration_time_s, 1.65, 0.005)
    assert alone.iteration_time_s == pytest.approx(sim(GE).iteration_time_s, rel=1e-12)
    r = sim(GE, {**ASYNC, **STRAGGLER})
    x = r.exchange
    assert about(x.fastest_replica_step_s, 1.65, 0.005) and about(x.slowest_replica_step_s, 2.82, 0.005)
    assert about(x.samples_per_s, 153.4, 0.001)
    share = x.samples_per_s / alone.exchange.samples_per_s
    assert about(share, 0.987, 0.001)
    assert share == pytest.approx((31 + x.fastest_replica_step_s / x.slowest_replica_step_s) / 32, rel=1e-12)
    assert about(r.time_per_step_s, 1.67, 0.005) and x.global_batch == 256


def test_parameter_server_as_shipped():
    """9.76 s per step for a 0.46 s replica step; each server NIC carries 64 x 6.5 GB / 8 = 52.3 GB."""
    r = sim(PS)
    x = r.exchange
    assert about(r.iteration_time_s, 9.76, 0.005) and about(x.step_s, 0.457, 0.01)
    assert about(x.server_nic_bytes, 52.3e9, 0.005)
    assert about(x.server_nic_bytes, 64 * x.bytes_per_gpu["scale-out"] / 8, 1e-9)


def test_parameter_server_counts():
    """one server: 418.7 GB and 74.9 s; 32 servers: still 9.76 s; all-reduce 1.39 s; gossip ring 1.18 s
    (its exchange 2 x 6.5 GB through a node's 100 GbE NIC, 1.16 s, 0.44 s of it hidden behind the
    step); torus 14.0 s."""
    one = sim(PS, {"parallelism.ps_servers": 1})
    assert about(one.exchange.server_nic_bytes, 418.7e9, 0.005) and about(one.iteration_time_s, 74.9, 0.005)
    assert about(sim(PS, {"parallelism.ps_servers": 32}).iteration_time_s, 9.76, 0.005)
    assert about(sim(PS, {"parallelism.dp_kind": "allreduce"}).iteration_time_s, 1.39, 0.005)
    ring = sim(PS, {"parallelism.dp_kind": "gossip-ring"})
    assert about(ring.iteration_time_s, 1.18, 0.01) and about(ring.exchange.exchange_s, 1.16, 0.01)
    assert about(ring.exchange.exchange_s - ring.exchange.exposed_s, 0.44, 0.01)
    assert about(sim(PS, {"parallelism.dp_kind": "gossip-torus"}).iteration_time_s, 14.0, 0.01)


def test_cbtm_never_crosses_the_wan():
    """0.702 s per step, no byte crosses the WAN."""
    r = sim(CB)
    assert about(r.time_per_step_s, 0.702, 0.002) and r.bytes_per_step["scale-across"] == 0.0


def test_cbtm_against_one_model():
    """every-step: 1.21 s, 43% the WAN-limited reduce-scatter; 10 Gb/s: 8.45 s; DiLoCo H=100: 0.705 s."""
    one = sim(CB, EVERY)
    assert about(one.iteration_time_s, 1.21, 0.005)
    assert about(one.breakdown_s["dp"] / one.iteration_time_s, 0.43, 0.02)
    # Its 236 MB buckets spend 15.3 of 20.5 ms in latency (three 5 ms WAN crossings of the ring's
    # steps): latency-bound across the WAN at 400 Gb/s (at 10 Gb/s the bytes take over).
    assert one.links["dp"]["tier"] == "scale-across latency"
    assert about(sim(CB, {**EVERY, "cluster.scale_across.bandwidth_Gbps": 10}).iteration_time_s, 8.45, 0.005)
    dl = sim(CB, {"training.sync.kind": "diloco", "training.sync.inner_steps": 100})
    assert about(dl.time_per_step_s, 0.705, 0.002)
    assert sim(CB).time_per_step_s < dl.time_per_step_s < one.iteration_time_s        # in between


# --------------------------------------------------------------------------- compression
CG = "cloud-25g-dp"
ONE_NODE = {"cluster.nodes": 1, "parallelism.dp": 8, "cluster.scale_up.kind": "nvswitch",
            "cluster.scale_up.bandwidth_GBps": 300, "training.global_batch": 256}


def _kind(k: str, extra: dict | None = None):
    return sim(CG, {"communication.compression.kind": k, **(extra or {})})


def test_cloud_without_compression():
    """1.13 s per step, 82% of it the all-reduce, limited by the node NIC at 3 GB/s."""
    r = _kind("none")
    assert about(r.iteration_time_s, 1.13, 0.005)
    assert about(r.breakdown_s["dp"] / r.iteration_time_s, 0.82, 0.01)
    assert r.links["dp"]["tier"] == "scale-out" and about(r.links["dp"]["busbw_GBps"], 3.0, 0.1)


def test_cloud_one_bit_as_shipped():
    """0.339 s; the residual adds 1.5 GB per GPU (the all-reduce: 1.5 GB per GPU per step uncompressed)."""
    r = sim(CG)
    assert about(r.iteration_time_s, 0.339, 0.005)
    none = _kind("none")
    assert about(r.memory.optimizer - none.memory.optimizer, 1.46e9, 0.01)
    assert about(none.comm_bytes_per_gpu["dp"], 2 * 63 / 64 * 1.46e9, 0.01)     # ring all-reduce


def test_cloud_other_compressors():
    """powersgd 0.207 s; fp16 0.618 s; int4 0.636 s (slower than fp16); top-k 1% 0.755 s."""
    assert about(_kind("powersgd").iteration_time_s, 0.207, 0.005)
    fp16, int4 = _kind("fp16").iteration_time_s, _kind("int4").iteration_time_s
    assert about(fp16, 0.618, 0.005) and about(int4, 0.636, 0.005) and int4 > fp16
    assert about(_kind("topk").iteration_time_s, 0.755, 0.005)


def test_cloud_compression_does_not_pay_on_one_nvswitch_node():
    """203.3 ms without compression, 205.8 ms with 1-bit, 204.8 ms with fp16 (the coders stream
    through HBM at its achieved bandwidth, physics/hardware.streaming_bytes_per_s)."""
    none, one_bit, fp16 = (_kind(k, ONE_NODE).iteration_time_s for k in ("none", "1bit", "fp16"))
    assert about(none, 0.2033, 0.002) and about(one_bit, 0.2058, 0.002) and about(fp16, 0.2048, 0.002)
    assert none < fp16 and none < one_bit                 # the encode and decode cost more than they save


def test_cloud_local_sgd_among_nodes():
    """each node trains alone (0.220 s per step over its PCIe) and the 8 nodes average every 8 steps
    (0.960 s): 0.340 s per step, about what 1-bit compression gives."""
    r = sim(CG, {"communication.compression.kind": "none", "training.sync.kind": "local-sgd",
                 "training.sync.replica_nodes": 1, "training.sync.inner_steps": 8})
    w = r.sync_window
    assert about(w.inner_step_s, 0.220, 0.005) and about(w.sync_s, 0.960, 0.005)
    assert about(r.time_per_step_s, 0.340, 0.005)
    assert about(r.time_per_step_s, sim(CG).iteration_time_s, 0.02)
