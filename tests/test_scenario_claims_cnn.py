"""The claims of resnet50-cloud-dp's description (issue 13.6: a CNN in data parallel on a
commodity cloud cluster, where compression is the lever), one test per claim, each quoting its
sentence.  Same conventions as tests/test_scenario_claims.py."""
from __future__ import annotations

from test_scenario_claims import about, sim

from explorer.scenario import load
from explorer.taskgraph.make import iteration_builder
from explorer.workloads.convnet import arch as convnet_arch

from conftest import ROOT

RN = "resnet50-cloud-dp"
ONE_NODE = {"cluster.nodes": 1, "parallelism.dp": 8, "cluster.scale_up.kind": "nvswitch",
            "cluster.scale_up.bandwidth_GBps": 300, "training.global_batch": 512}
VIDEO = {"model.preset": "slowonly-r50", "training.global_batch": 512, "training.micro_batch": 8}


def _kind(k: str, extra: dict | None = None) -> float:
    return sim(RN, {"communication.compression.kind": k, **(extra or {})}).iteration_time_s


def test_one_a100_gives_2143_images_per_second():
    """on one A100 the model gives 2,143 images/s against the 2,470 NVIDIA publishes"""
    r = sim(RN, {"cluster.nodes": 1, "cluster.gpus_per_node": 1, "parallelism.dp": 1,
                 "training.global_batch": 256, "training.micro_batch": 256,
                 "communication.compression.kind": "none"})
    assert about(r.tokens_per_s, 2143, 0.005)


def test_gradients_arrive_early():
    """86% of the parameters sit in the last two stages (res4, res5) ... 66% of the gradient exists
    after 9% of the backward"""
    net = convnet_arch.build(50)
    assert about(sum(b.params for b in net.blocks if b.stage >= 2) / net.params, 0.86, 0.01)
    ch = iteration_builder(load(ROOT / "scenarios" / f"{RN}.yaml")).chunks[0]
    assert ch.ready_fraction(0.66) <= 0.09


def test_powersgd_as_shipped():
    """As shipped, PowerSGD rank 4: 32.9 ms per step ... 1.5% of the bytes"""
    r = sim(RN)
    assert about(r.iteration_time_s, 0.0329, 0.003)
    assert about(sim(RN).comm_bytes_per_gpu["dp"] / sim(RN, {"communication.compression.kind": "none"})
                 .comm_bytes_per_gpu["dp"], 0.015, 0.05)


def test_without_compression_and_the_other_compressors():
    """91.4 ms, 65% of it the 102 MB fp32 gradient ... fp16 55.7 ms; int4 53.0 ms; top-k 1% 61.0 ms;
    1-bit 45.0 ms ... none of it overlaps"""
    none = sim(RN, {"communication.compression.kind": "none"})
    assert about(none.iteration_time_s, 0.0914, 0.003)
    assert about(none.breakdown_s["dp"] / none.iteration_time_s, 0.65, 0.01)
    for kind, t in (("fp16", 0.0557), ("int4", 0.0530), ("1bit", 0.0450), ("topk", 0.0610)):
        assert about(_kind(kind), t, 0.003), kind


def test_a_faster_nic_buys_what_powersgd_buys():
    """eth-100, no compression: 37.2 ms — PowerSGD on 25 GbE beats a 4x faster NIC"""
    t = sim(RN, {"cluster.scale_out.fabric": "eth-100", "communication.compression.kind": "none"})
    assert about(t.iteration_time_s, 0.0372, 0.003) and sim(RN).iteration_time_s < t.iteration_time_s


def test_compression_does_not_pay_on_one_nvswitch_node():
    """all but 0.25 ms of the all-reduce hides behind the backward: 32.2 ms without compression,
    31.9 ms with 1-bit, 32.0 ms with fp16, 32.0 ms with PowerSGD — under 1% to gain"""
    none, onebit, fp16, psgd = (_kind(k, ONE_NODE) for k in ("none", "1bit", "fp16", "powersgd"))
    assert about(sim(RN, {"communication.compression.kind": "none", **ONE_NODE}).breakdown_s["dp"],
                 0.00025, 0.03)
    assert about(none, 0.0322, 0.003) and about(onebit, 0.0319, 0.003)
    assert about(fp16, 0.0320, 0.003) and about(psgd, 0.0320, 0.003)
    assert max(none, onebit, fp16, psgd) / min(none, onebit, fp16, psgd) < 1.01


def test_the_video_model():
    """45.1 ms per step with PowerSGD, 116.8 ms without compression"""
    assert about(sim(RN, VIDEO).iteration_time_s, 0.0451, 0.003)
    assert about(_kind("none", VIDEO), 0.1168, 0.003)


def test_local_sgd_among_nodes():
    """each node trains alone ... (33.8 ms), and the 8 nodes average their models every 8 steps over
    the NICs (68.4 ms): 42.3 ms per step; every 16 steps, 38.1 ms."""
    over = {"communication.compression.kind": "none", "training.sync.kind": "local-sgd",
            "training.sync.replica_nodes": 1, "training.sync.inner_steps": 8}
    r = sim(RN, over)
    assert about(r.sync_window.inner_step_s, 0.0338, 0.003) and about(r.sync_window.sync_s, 0.0684, 0.003)
    assert about(r.time_per_step_s, 0.0423, 0.003)
    assert about(sim(RN, {**over, "training.sync.inner_steps": 16}).time_per_step_s, 0.0381, 0.003)
