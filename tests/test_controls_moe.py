"""communication.moe_dispatcher: how MoE tokens cross the expert-parallel group.

Closed forms of the node-deduplicated bytes (DeepSeek-V3 Sec. 3.2.2), DeepEP's published bandwidths
reproduced from the link model (deepseek-ai/DeepEP docs/legacy.md), and the control's direction.
"""
from __future__ import annotations

from functools import cache

import pytest

from explorer.config.loading import load
from explorer.config.moe_dispatch import resolved_dispatcher
from explorer.fidelity.moe_dispatch import dispatch_reference_rows
from explorer.physics import kernels as K
from explorer.physics.hardware import HBM_EFFICIENCY
from explorer.scenario import from_dict
from explorer.simulate import Result, simulate
from explorer.taskgraph.techniques.moe_routing import (
    deduplicated_bytes,
)
from explorer.workloads.timing import GemmTimer
from explorer.workloads.transformer.layer import MOE_PERMUTE_PASSES, PERMUTE_HBM_FRACTION, layer_cost

from conftest import ROOT

COVERED = {"communication.moe_dispatcher": "test_deepep_beats_alltoall_across_nodes"}
DEEPSEEK = ROOT / "scenarios" / "deepseek-v3.yaml"


def _moe(ep: int, nodes: int, dispatcher: str | None, comm_sms: int | None = 0, max_nodes: int = 4) -> dict:
    """A 4-layer MoE (64 experts, top-8) on H800 nodes with EP over ``nodes`` nodes."""
    comm = {} if dispatcher is None else {"moe_dispatcher": dispatcher}
    if comm_sms is not None:
        comm["comm_sms"] = comm_sms
    return {"model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 1024,
                      "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 1024, "shared_experts": 1,
                              "dense_layers": 0, "max_nodes": max_nodes}},
            "training": {"global_batch": 64, "micro_batch": 1},
            "hardware": {"gpu": "h800"},
            "cluster": {"gpus_per_node": 8, "nodes": nodes, "scale_up": {"bandwidth_GBps": 200},
                        "scale_out": {"nic_Gbps": 400}},
            "parallelism": {"ep": ep, "zero": 1},
            "communication": comm}


@cache
def _sim(ep: int, nodes: int, dispatcher: str | None, comm_sms: int | None = 0) -> Result:
    return simulate(from_dict(_moe(ep, nodes, dispatcher, comm_sms)))


def test_deduplicated_bytes_closed_form():
    """Top-8 over 4 of 8 nodes of 8 GPUs (DeepSeek-V3's EP 64): a token crosses the NIC once per
    distinct remote node, 4(1-(3/4)^8) x 7/8 copies, and NVLink once per distinct other GPU,
    32(1-(31/32)^8) x 7/8 copies; without a node limit 8(1-(7/8)^8) x 7/8 fabric copies."""
    size = 8.0                                     # one byte per copy: results are copies per token
    fabric, nvlink = deduplicated_bytes(size, 8, 8, 8, 4)
    assert fabric == pytest.approx(4 * (1 - 0.75 ** 8) * 7 / 8, rel=1e-12)
    assert nvlink == pytest.approx(32 * (1 - (31 / 32) ** 8) * 7 / 8, rel=1e-12)
    free, _ = deduplicated_bytes(size, 8, 8, 8, 0)
    assert free == pytest.approx(8 * (1 - (7 / 8) ** 8) * 7 / 8, rel=1e-12)
    # A plain all-to-all sends every copy that leaves the node: 8 x 7/8 = 7 > 3.15.
    assert fabric < free < 7.0


@pytest.mark.parametrize("row", dispatch_reference_rows(), ids=lambda r: r.label)
def test_deepep_published_rdma_bandwidth(row):
    """DeepEP V1 normal kernels on H800 + CX7 400 Gb/s, DeepSeek-V3 setting (deepseek-ai/DeepEP
    docs/legacy.md): logical RDMA bandwidth (every (token, node) pair, own node included) 43 / 58 / 51
    GB/s dispatch at EP 16 / 32 / 64.  EP 64 and 32 dispatch set RDMA_OVER_NCCL (within 3 %); EP 16
    (NVLink-bound in the model) and the combine rows are validation (within 12 %)."""
    assert abs(row.error) <= (0.03 if row.role == "calibration" else 0.12), row


def test_deepep_beats_alltoall_across_nodes():
    """Top-8 over 4 nodes (EP 32): DeepEP sends a token once per node and forwards it over NVLink,
    the NCCL all-to-all sends all 8 copies, 7/8 of them over the NICs: less EP time, faster."""
    plain, deepep = _sim(32, 4, "alltoall"), _sim(32, 4, "deepep")
    assert deepep.breakdown_s["ep"] < 0.6 * plain.breakdown_s["ep"]
    assert deepep.iteration_time_s < plain.iteration_time_s
    # Hybrid-EP moves the same bytes at the same measured rates (DeepEP issue #590).
    assert _sim(32, 4, "hybridep").iteration_time_s == pytest.approx(deepep.iteration_time_s, rel=1e-12)


def test_dispatchers_are_one_all_to_all_inside_a_node():
    """Inside one NVLink domain there is no node to deduplicate: every dispatcher prices alike."""
    assert _sim(8, 1, "deepep").iteration_time_s == pytest.approx(_sim(8, 1, "alltoall").iteration_time_s,
                                                                  rel=1e-12)


def test_dispatcher_default_and_its_sms():
    """Unset: deepep under node-limited routing (max_nodes > 0), else alltoall; comm_sms unset takes
    the dispatcher's SMs (DeepEP 24, Hybrid-EP 16, NCCL 0), and those SMs slow the compute the
    all-to-alls hide under (so hybridep, with fewer, is not slower)."""
    sc = from_dict(_moe(32, 4, None, None))
    assert resolved_dispatcher(sc.communication.moe_dispatcher, sc.model.moe) == "deepep"
    assert sc.communication.comm_sms == 24
    assert from_dict(_moe(32, 4, "hybridep", None)).communication.comm_sms == 16
    assert from_dict(_moe(32, 4, "alltoall", None)).communication.comm_sms == 0
    free = from_dict(_moe(32, 4, None, None, max_nodes=0))
    assert resolved_dispatcher(free.communication.moe_dispatcher, free.model.moe) == "alltoall"
    assert _sim(32, 4, "hybridep", None).iteration_time_s <= _sim(32, 4, "deepep", None).iteration_time_s


def test_unknown_dispatcher_is_a_one_line_error():
    raw = _moe(32, 4, "nccl")
    with pytest.raises(Exception, match="communication.moe_dispatcher.*alltoall, deepep, hybridep"):
        from_dict(raw)


# ------------------------------------------------------------------------------------------------
# Routed experts on their real kernels: ragged grouped GEMMs and the permutation copies.
# ------------------------------------------------------------------------------------------------
def test_ragged_row_tiles_closed_form_and_torchao_offsets():
    """Each expert's rows are padded to whole tiles: m/tm + 1/2 tiles on average when counts vary;
    ceil(m/tm) for equal groups.  torchao's grouped-mm benchmark (pytorch/ao pull request
    #2490, Llama 4 17Bx16E, 8192 rows over 16 experts) has offsets whose exact 128-row tiles sum to
    16 x (512/128 + 1/2) = 72."""
    offs = [272, 832, 1744, 2288, 2768, 3056, 4160, 4352, 4544, 4800, 5056, 5360, 6432, 7760, 7872, 8192]
    sizes = [b - a for a, b in zip([0, *offs[:-1]], offs, strict=True)]
    assert sum(-(-s // 128) for s in sizes) == 72 == 16 * K.row_tiles(512, 128, True)
    assert K.row_tiles(1024, 128, False) == 8 and K.row_tiles(1024, 128, True) == 8.5
    assert K.row_tiles(1040, 128, False) == 9 and K.row_tiles(1040, 128, True) == 8.625


def test_b200_expert_gemms_pay_the_ragged_padding():
    """Regression (issue 34, B200 MoE compute too fast): DeepSeek-V3 on B200 with EP 8 gives each
    rank 32 experts of ~1024 tokens; their forward GEMMs are priced with padded row tiles, so the
    layer's routed-expert forward takes longer than 32 equal 1024-row groups would, by the padding
    of the tile the timer picks (between 1/16 and 1/8 of a 128/256-row tile: 3-13 %)."""
    sc = load(ROOT / "scenarios" / "deepseek-v3.yaml",
              {"hardware.gpu": "b200", "parallelism.ep": 8, "training.dtype": "bf16"})
    lc = layer_cost(sc, moe_layer=True)
    timer = GemmTimer(sc)
    gpu, eff = timer.gpu, timer.eff["bf16"]
    equal = sum(32 * K.gemm_seconds(1024.0, n, k, "bf16", gpu, eff, 32)
                for n, k in ((4096, 7168), (7168, 2048)))
    assert 1.03 < lc.expert_fwd.gemm_s / equal < 1.13


def test_permutation_copies_run_at_their_measured_share_of_hbm():
    """The routed tokens' permute/unpermute (4 passes of h per token copy) run at 0.67 of HBM peak
    (DeepEP pull request #605, GB200 expanded-layout copy), the streaming kernels at HBM_EFFICIENCY:
    the MoE layer's forward stream exceeds the dense layer's by the permutation at that rate."""
    sc = load(DEEPSEEK, {"training.dtype": "bf16"})
    moe, m = layer_cost(sc, moe_layer=True), sc.model
    tokens, h, e = m.seq_len, m.hidden, 2
    permute_bytes = tokens * m.moe.top_k * MOE_PERMUTE_PASSES * h * e
    assert PERMUTE_HBM_FRACTION == pytest.approx(0.669, abs=0.001)
    charged = permute_bytes * HBM_EFFICIENCY / PERMUTE_HBM_FRACTION
    # Seconds at the compute model's streaming rate = bytes at 0.67 of the data-sheet bandwidth.
    hbm = sc.hardware.gpu.hbm_GBps * 1e9
    assert charged / (hbm * HBM_EFFICIENCY) == pytest.approx(permute_bytes / (hbm * PERMUTE_HBM_FRACTION))
    assert moe.fwd.stream_bytes > charged


def test_the_apps_dispatcher_shows_the_one_in_force_and_re_derives_its_sms():
    """The sidebar shows DeepSeek-V3's dispatcher as the one simulated (deepep under node-limited
    routing); choosing NCCL's all-to-all gives back the SMs DeepEP held (comm_sms re-derived to the
    dispatcher's default when the scenario's own value is not kept)."""
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu")
    assert at.selectbox(key="communication.moe_dispatcher").value == "alltoall"
    at = run_app(scenario="deepseek-v3")
    assert at.selectbox(key="communication.moe_dispatcher").value == "deepep"
    before = at.metric[0].value
    at.selectbox(key="communication.moe_dispatcher").set_value("alltoall").run()
    assert not at.exception
    assert at.number_input(key="communication.comm_sms").value == 0
    assert at.metric[0].value != before
