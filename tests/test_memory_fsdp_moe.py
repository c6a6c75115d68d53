"""ZeRO-3 / FSDP memory of a MoE model whose experts are not sharded: with expert parallelism
equal to the data-parallel degree the expert-data-parallel group is one rank, which holds its
experts whole and gathers nothing (FSDP's NO_SHARD at world size 1,
torch/distributed/fsdp/_init_utils.py).  A hunt found the gathered working set counting those
experts a second time: NeMo AutoModel's DeepSeek-V3 on 256 H100s (PP4 VP8 EP64 FSDP2) was shown at
98.5 GB against 85.9 usable where it ran.

Closed forms per stage (taskgraph/techniques/fsdp.zero3_working_set), bf16 parameters (2 B), d dense
and e expert parameters held, nd and ne their groups' sizes, L the largest gathered layer's bytes:
- FSDP2 under a pipeline: parameters 2 d/nd + 2 e/ne + 2 (d [nd > 1] + e [ne > 1]) (the stage's
  sharded parameters gathered for the step); gradients 2 d/nd + 2 e/ne + L + 4 (d [nd > 1] + e [ne > 1])
  (the accumulated unsharded gradients in fp32);
- FSDP1: parameters 2 d/nd + 2 e/ne + L (1 + prefetch_layers), L the largest layer's gathered part.
"""
from __future__ import annotations

from typing import Any

import pytest

from explorer.estimate.fast import estimate_many
from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.taskgraph.make import iteration_builder


def _mixtral(framework: str, ep: int, pp: int = 2) -> dict[str, Any]:
    """Mixtral 8x7B on 32 H100s: TP 2 x PP ``pp`` x DP, EP ``ep``, ZeRO-3."""
    return {"name": "mixtral", "model": {"preset": "mixtral-8x7b", "seq_len": 4096},
            "training": {"global_batch": 64, "micro_batch": 1, "dtype": "bf16", "recompute": "full",
                         "framework": framework},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 4},
            "parallelism": {"tp": 2, "pp": pp, "ep": ep, "zero": 3, "schedule": "1f1b"}}


def _held(raw: dict[str, Any], stage: int) -> tuple[float, float, int, int, float]:
    """(dense, expert parameters held on ``stage``, dp and edp group sizes, the largest gathered
    layer's bytes)."""
    b = iteration_builder(from_dict(raw))
    chunks = [ch for ch, _ in b.rank_chunks(stage)]
    return (sum(c.params for c in chunks), sum(c.expert_params for c in chunks),
            b.net.group_size("dp", stage), b.net.group_size("edp", stage),
            max(c.fsdp_layer_bytes for c in chunks))


@pytest.mark.parametrize("ep", [8, 4])
def test_fsdp2_under_a_pipeline_gathers_only_the_experts_of_a_group_of_several(ep):
    raw = _mixtral("fsdp2", ep)
    r = simulate(from_dict(raw))
    for s, mem in enumerate(r.memory_by_class):
        d, e, nd, ne, layer = _held(raw, s)
        assert (nd, ne) == (8, 8 // ep)              # dp 8; ep 8 leaves one expert-data-parallel rank
        gathered = d + (e if ne > 1 else 0.0)
        assert mem.params == pytest.approx(2 * d / nd + 2 * e / ne + 2 * gathered, rel=1e-12)
        assert mem.grads == pytest.approx(2 * d / nd + 2 * e / ne + layer + 4 * gathered, rel=1e-12)
    assert estimate_many([from_dict(raw)]).memory_GB_total[0] == pytest.approx(r.memory.total / 1e9, rel=1e-9)


def test_fsdp1_gathers_a_layers_dense_part_only_when_its_experts_are_whole():
    """FSDP1 (no step-long gather): the largest gathered layer is the attention and router part of
    a MoE layer when ep = dp, its experts being whole on the rank."""
    raw = _mixtral("fsdp", 8)
    sc = from_dict(raw)
    r = simulate(sc)
    for s, mem in enumerate(r.memory_by_class):
        d, e, nd, ne, layer = _held(raw, s)
        assert ne == 1
        # A Mixtral layer's dense part (attention, router: 42M / tp 2) or the embedding (131M / tp 2),
        # never a layer with its experts (a further 352M / tp 2).
        assert layer <= 2 * 131.1e6 / 2
        ahead = 1 + sc.communication.prefetch_layers
        assert mem.params == pytest.approx(2 * d / nd + 2 * e + layer * ahead, rel=1e-12)
    assert estimate_many([sc]).memory_GB_total[0] == pytest.approx(r.memory.total / 1e9, rel=1e-9)
