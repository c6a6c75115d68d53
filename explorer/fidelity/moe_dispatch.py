"""DeepEP's published dispatch/combine bandwidths next to what the simulator's hierarchical pass
(explorer/taskgraph/techniques/moe_routing.py) gives for the same setup.

Source: deepseek-ai/DeepEP docs/legacy.md, "Normal kernels with NVLink and RDMA forwarding": H800
(NVLink 200 GB/s per direction, ~160 GB/s measured) with one CX7 400 Gb/s InfiniBand NIC per GPU,
the DeepSeek-V3 pretraining setting (4096 tokens per rank, hidden 7168, top-4 groups, top-8
experts, FP8 dispatch, BF16 combine), 24 SMs.  The bandwidths are logical: every (token,
destination node) pair counts, the rank's own node included (tests/test_internode.py), and are
compared as such.  The EP 32 and EP 64 dispatch rows set moe_routing.RDMA_OVER_NCCL (calibration);
the EP 16 dispatch row and the combine rows were not used (validation).
"""
from __future__ import annotations

from ..config.loading import from_dict
from ..network.groups import Network
from ..taskgraph.techniques.moe_routing import expected_distinct_nodes, hierarchical_pass
from .report import ReferenceRow

GROUP = "MoE dispatch/combine (DeepEP normal kernels, H800 + CX7)"
SOURCE = "deepseek-ai/DeepEP docs/legacy.md, normal kernels table"
TOKENS, HIDDEN, TOP_K, GROUPS = 4096, 7168, 8, 4
# (EP, operation, measured logical RDMA GB/s, role)
ROWS = ((16, "dispatch", 43.0, "validation"), (32, "dispatch", 58.0, "calibration"),
        (64, "dispatch", 51.0, "calibration"), (16, "combine", 43.0, "validation"),
        (32, "combine", 57.0, "validation"), (64, "combine", 50.0, "validation"))


def predicted_rdma_GBps(ep: int) -> float:
    """Logical RDMA bandwidth of one hierarchical pass over ``ep`` H800s (8 per node): the tokens'
    (token, node) pairs over the pass's bandwidth time (latency excluded, as DeepEP's tuning runs
    time back-to-back kernels)."""
    nodes = ep // 8
    sc = from_dict({"model": {"layers": 1, "hidden": HIDDEN, "heads": 56, "vocab": 8, "seq_len": TOKENS,
                              "moe": {"experts": 256, "top_k": TOP_K, "expert_ffn_hidden": 2048,
                                      "max_nodes": GROUPS}},
                    "training": {"global_batch": ep, "micro_batch": 1},
                    "hardware": {"gpu": "h800"},
                    "cluster": {"gpus_per_node": 8, "nodes": nodes, "scale_up": {"bandwidth_GBps": 200},
                                "scale_out": {"kind": "rail-optimized", "fabric": "ib-ndr",
                                              "nics_per_node": 8}},
                    "parallelism": {"ep": ep, "zero": 1}})
    sh = Network(sc).shape("ep", 0)
    cc, _ = hierarchical_pass(TOKENS * TOP_K * HIDDEN * 1.0, sh, TOP_K, GROUPS)
    pairs = TOKENS * expected_distinct_nodes(min(GROUPS, nodes), TOP_K, TOP_K)
    return pairs * HIDDEN / (cc.time_s - cc.latency_s) / 1e9


def dispatch_reference_rows() -> list[ReferenceRow]:
    """Every DeepEP row with the simulator's prediction, for the fidelity report."""
    return [ReferenceRow(GROUP, f"H800 EP {ep} {op}", measured, predicted_rdma_GBps(ep),
                         "GB/s RDMA (logical)", role, SOURCE) for ep, op, measured, role in ROWS]


if __name__ == "__main__":
    for r in dispatch_reference_rows():
        print(f"{r.role:11s} {r.label:24s} measured {r.measured:6.1f} predicted {r.predicted:6.1f} "
              f"error {r.error:+6.1%}")
