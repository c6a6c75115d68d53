"""PyTorch FSDP mechanisms the simulator charges (explorer/config/nccl_channels.py,
explorer/taskgraph/techniques/fsdp.py): NCCL's SMs while FSDP's collectives overlap compute, and
FSDP2's copy kernels on the compute stream.  Closed forms with their sources' numbers."""
from __future__ import annotations

import pytest

from explorer.config.frameworks import profile
from explorer.config.nccl_channels import nccl_channels
from explorer.network.groups import Network
from explorer.physics.hardware import ComputeModel
from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.taskgraph.techniques.fsdp import comm_zero, fsdp_copy_bytes, fsdp_cost, grad_reduce_overlaps


def _fsdp8(framework: str, **comm) -> dict:
    """Llama 3 8B fully sharded over the 8 H100s of one node (ZeRO-3)."""
    return {"model": {"preset": "llama3-8b"},
            "training": {"global_batch": 16, "framework": framework, "attention_kernel": "flash2"},
            "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
            "parallelism": {"zero": 3}, "communication": comm}


# --- NCCL channels = SMs --------------------------------------------------------------------------

@pytest.mark.parametrize("scale_up, crosses, nics, channels", [
    (300.0, False, 8, 24),   # HGX A100, 12 NVLinks: "Channel 23/24" (NVIDIA/nccl-tests #100)
    (200.0, False, 8, 16),   # H800, 8 NVLinks: "16 coll channels" (NVIDIA/nccl #892)
    (450.0, False, 8, 32),   # H100, 18 NVLinks x 2 CTAs = 36, capped at MAXCHANNELS 32 (nccl #1429)
    (450.0, True, 8, 16),    # H100 ring over 3 nodes of 8 NICs: "Channel 05/16" (NVIDIA/nccl #1453)
    (300.0, True, 8, 16),
    (450.0, True, 1, 2),     # one NIC per node: "just launch 2 SMs" (NVIDIA/nccl #689)
    (25.0, True, 8, 2),      # one link's worth of scale-up caps it
])
def test_nccl_channels_follow_the_nvlinks_and_the_nics(scale_up, crosses, nics, channels):
    assert nccl_channels(scale_up, crosses, nics) == channels


def test_fsdp_defaults_comm_sms_to_nccls_channels_megatron_keeps_zero():
    # Old code: every framework defaulted to 0 SMs (no contention under FSDP's overlapped collectives).
    assert from_dict(_fsdp8("fsdp")).communication.comm_sms == 32
    assert from_dict(_fsdp8("torchtitan")).communication.comm_sms == 32
    multi = _fsdp8("fsdp2")
    multi["cluster"] = {"gpus_per_node": 8, "nodes": 4}
    multi["training"]["global_batch"] = 64
    assert from_dict(multi).communication.comm_sms == 16        # the DP group crosses nodes
    a100 = _fsdp8("fsdp")
    a100["hardware"] = {"gpu": "a100-80gb"}
    assert from_dict(a100).communication.comm_sms == 24
    assert from_dict(_fsdp8("megatron")).communication.comm_sms == 0
    assert from_dict(_fsdp8("fsdp", comm_sms=4)).communication.comm_sms == 4   # a stated value wins


def test_nccls_sms_slow_the_compute_fsdp_hides_under():
    # The contention rule (dp_contention.sm_factor): the same run with 0 SMs is faster by
    # hidden_dp x 32/132; the gap must be positive and below that bound's whole hidden time.
    slow = simulate(from_dict(_fsdp8("fsdp")))
    fast = simulate(from_dict(_fsdp8("fsdp", comm_sms=0)))
    assert slow.iteration_time_s > fast.iteration_time_s * 1.005


# --- FSDP2 copy kernels --------------------------------------------------------------------------

def test_copy_bytes_closed_form():
    # split_with_sizes_copy reads the gather buffer and writes the parameter: 2 x 2 B; chunk_cat
    # reads the bf16 gradient (2 B) and writes the reduce dtype (fp32: 4 B).
    assert fsdp_copy_bytes(1e9, 4) == (4e9, 4e9 + 6e9)
    assert fsdp_copy_bytes(1e9, 2) == (4e9, 4e9 + 4e9)


def test_fsdp2_charges_its_copies_at_hbm_speed_fsdp1_does_not():
    sc2, sc1 = from_dict(_fsdp8("fsdp2", comm_sms=0)), from_dict(_fsdp8("fsdp", comm_sms=0))
    hbm = ComputeModel.for_scenario(sc2).hbm_bytes_per_s
    params = 218e6                                        # one Llama 3 8B layer, about
    c2 = fsdp_cost(params, 0.0, Network(sc2), 0, 0.05, 0.1, 1, True, hbm)
    c1 = fsdp_cost(params, 0.0, Network(sc1), 0, 0.05, 0.1, 1, True, hbm)
    # fsdp/fsdp2 reduce in fp32 (torchtitan's mixed_precision_reduce): 4 + 6 bytes per parameter.
    assert c2.copy_f == pytest.approx(4 * params / hbm)
    assert c2.copy_b == pytest.approx(10 * params / hbm)
    assert c1.copy_f == c1.copy_b == 0.0
    assert profile("torchtitan").fsdp_copy_kernels and not profile("fsdp").fsdp_copy_kernels


def test_fsdp2_iteration_is_longer_by_its_copies():
    # Regression: on the old code fsdp2 priced exactly as fsdp.  The copies run on the compute
    # stream once per FSDP unit (layer, embedding, output layer) per micro-batch: every parameter
    # x micro-batches x (4 + 10) B / HBM rate of compute-stream time.
    r2 = simulate(from_dict(_fsdp8("fsdp2", comm_sms=0)))
    r1 = simulate(from_dict(_fsdp8("fsdp", comm_sms=0)))
    sc = r2.scenario
    m = sc.model
    hbm = ComputeModel.for_scenario(sc).hbm_bytes_per_s
    micro = sc.training.global_batch // (sc.dp * sc.training.micro_batch)
    params = m.layers * _layer_params(sc) + 2 * m.vocab * m.hidden    # untied embedding + output
    extra = r2.breakdown_s["compute"] - r1.breakdown_s["compute"]
    assert extra == pytest.approx(micro * 14 * params / hbm, rel=1e-3)
    # Part of it lets more of the gathers hide (the copies are compute-stream time), the rest
    # lengthens the step.
    assert extra > r2.iteration_time_s - r1.iteration_time_s > 0.5 * extra


def _layer_params(sc) -> float:
    """Parameters of one Llama layer (attention with GQA + SwiGLU FFN; norms are negligible)."""
    m = sc.model
    head = m.hidden // m.heads
    attn = m.hidden * (m.hidden + 2 * m.kv_heads * head) + m.hidden * m.hidden
    return attn + 3 * m.hidden * m.ffn_hidden


# --- FSDP2 under a pipeline: gathered once, reduced once per step ----------------------------------

def _3d(framework: str, global_batch: int = 64) -> dict:
    """Llama 3 70B on 64 H100s: TP 8 inside the node, PP 4, FSDP (ZeRO-3) over the remaining 2."""
    return {"model": {"preset": "llama3-70b"},
            "training": {"global_batch": global_batch, "framework": framework, "recompute": "full"},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 8, "nodes": 8, "scale_out": {"fabric": "ib-ndr"}},
            "parallelism": {"tp": 8, "pp": 4, "zero": 3}}


def test_fsdp2_with_a_pipeline_communicates_as_zero2():
    # torchtitan: reshard_after_forward = not pp_enabled; pipelining: no gradient sync until the
    # stage's last backward (perform_reduce_grad).  FSDP1 and pp = 1 keep the layer-wise ZeRO-3.
    assert comm_zero(from_dict(_3d("torchtitan"))) == 2
    assert comm_zero(from_dict(_3d("fsdp2"))) == 2
    assert not grad_reduce_overlaps(from_dict(_3d("fsdp2")))
    assert comm_zero(from_dict(_3d("fsdp"))) == 3
    assert comm_zero(from_dict(_3d("megatron"))) == 3
    assert comm_zero(from_dict(_fsdp8("torchtitan"))) == 3          # pp = 1: per-layer reshard


def test_fsdp2_pipeline_traffic_does_not_grow_with_micro_batches():
    # Regression: the old code gathered twice and reduce-scattered once per layer per micro-batch,
    # so doubling the batch doubled the DP bytes.  FSDP2 under a pipeline moves one gather and one
    # reduce-scatter of the stage's parameters per step, whatever the micro-batch count;
    # FSDP1 (layer-wise, per micro-batch) still doubles.
    t1 = simulate(from_dict(_3d("torchtitan", 64))).comm_bytes_per_gpu["dp"]
    t2 = simulate(from_dict(_3d("torchtitan", 128))).comm_bytes_per_gpu["dp"]
    f1 = simulate(from_dict(_3d("fsdp", 64))).comm_bytes_per_gpu["dp"]
    f2 = simulate(from_dict(_3d("fsdp", 128))).comm_bytes_per_gpu["dp"]
    assert t2 == pytest.approx(t1, rel=1e-9)
    assert f2 == pytest.approx(2 * f1, rel=1e-9)
    # One gather (2 B bf16) + one reduce-scatter (4 B fp32) of each parameter, against FSDP1's
    # 2 gathers + 1 reduce-scatter per micro-batch (64 / dp 2 = 32 micro-batches of 1): 6 / (32 x 8).
    assert t1 / f1 == pytest.approx(6 / (32 * 8), rel=0.02)
