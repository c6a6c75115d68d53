"""Expert parallelism: all-to-all volume (GShard), node-limited routing (DeepSeek-V3), imbalance."""
from __future__ import annotations

import pytest

from explorer.scenario import from_dict
from explorer.simulate import simulate


def moe_raw(ep=16, max_nodes=0, imbalance=1.0, nodes=2):
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 1024,
                      "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 1024, "shared_experts": 1,
                              "dense_layers": 0, "max_nodes": max_nodes, "imbalance": imbalance}},
            "training": {"global_batch": 8 * nodes, "micro_batch": 1},
            "hardware": {"gpu": "h800"},
            "cluster": {"gpus_per_node": 8, "nodes": nodes,
                        "scale_up": {"bandwidth_GBps": 200}, "scale_out": {"nic_Gbps": 400}},
            "parallelism": {"ep": ep, "zero": 1}}


def test_all_to_all_volume_is_tokens_times_top_k_times_hidden():
    # GShard: dispatch and combine each move tokens x top_k x hidden elements per GPU, forward and
    # backward: 4 all-to-alls per MoE layer and micro-batch; bus bytes = size x (n-1)/n.
    r = simulate(from_dict(moe_raw(ep=16)))
    tokens, k, h, e, n = 1024, 8, 2048, 2, 16
    size = tokens * k * h * e
    assert r.comm_bytes_per_gpu["ep"] == pytest.approx(1 * 4 * 4 * size * (n - 1) / n)


def test_node_limited_routing_shifts_traffic_from_the_fabric_to_nvlink():
    # 16 experts' ranks on 2 nodes, top-8: a token reaches 2 * (1 - (1/2)^8) ~ 2 nodes; limited to
    # 1 node it crosses InfiniBand at most once (DeepSeek-V3 report Sec. 3.2.2), so EP gets faster.
    free = simulate(from_dict(moe_raw(ep=16, max_nodes=0)))
    limited = simulate(from_dict(moe_raw(ep=16, max_nodes=1)))
    assert limited.breakdown_s["ep"] < 0.6 * free.breakdown_s["ep"]


def test_node_limit_changes_nothing_inside_one_node():
    a = simulate(from_dict(moe_raw(ep=8, max_nodes=0, nodes=1)))
    b = simulate(from_dict(moe_raw(ep=8, max_nodes=1, nodes=1)))
    assert a.breakdown_s["ep"] == pytest.approx(b.breakdown_s["ep"])


def test_load_imbalance_stretches_all_to_all_and_expert_compute():
    even = simulate(from_dict(moe_raw(ep=16, imbalance=1.0)))
    skew = simulate(from_dict(moe_raw(ep=16, imbalance=2.0)))
    assert skew.breakdown_s["ep"] == pytest.approx(2 * even.breakdown_s["ep"], rel=1e-9)
    assert skew.breakdown_s["compute"] > even.breakdown_s["compute"]
    # FLOPs executed on average do not change: tflops_per_gpu falls with the time.
    work = even.tflops_per_gpu * even.iteration_time_s
    assert skew.tflops_per_gpu * skew.iteration_time_s == pytest.approx(work)


def test_link_summary_and_bytes_report_the_dispatch_that_was_priced():
    """Node-limited routing: the EP link in the JSON is the node-aware dispatch the timeline
    charged (faster, fewer fabric bytes), not a plain all-to-all priced a second time."""
    plain = simulate(from_dict(moe_raw(ep=16, max_nodes=0)))
    limited = simulate(from_dict(moe_raw(ep=16, max_nodes=1)))
    assert plain.links["ep"]["algorithm"] != "node-aware"
    assert limited.links["ep"]["algorithm"] == "node-aware"
    assert limited.links["ep"]["time_s"] < plain.links["ep"]["time_s"]
    assert (limited.comm_bytes_by_tier["ep"]["scale-out"] < plain.comm_bytes_by_tier["ep"]["scale-out"])
    assert max(limited.utilisation.values()) <= 1.0 + 1e-9
