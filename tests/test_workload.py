"""Workload formulas against their papers: FLOPs (SC21 Eq. 3), activation memory (Korthikanti et al.
2022, Table 2), parameter counts (model cards) and ZeRO memory (Rajbhandari et al. SC20)."""
from __future__ import annotations

import pytest

from explorer.fidelity.calibration import megatron_rows, megatron_scenario
from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.workloads.transformer.layer import layer_cost, model_params


@pytest.mark.parametrize("row", megatron_rows()[:6], ids=lambda r: f"{r.params_billion}B")
def test_hardware_flops_equal_megatron_eq3_with_full_recompute(row):
    # F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration (Narayanan et al. SC21, Eq. 3).
    B, s, L, h, V = row.global_batch, 2048, row.layers, row.hidden, 51200
    F = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    r = simulate(megatron_scenario(row))
    assert r.tflops_per_gpu * 1e12 * r.iteration_time_s * row.gpus == pytest.approx(F, rel=1e-9)
    # MFU counts the same FLOPs without the recompute forward: 3/4 of the layer FLOPs.
    model = F - 24 * B * s * L * h**2 * (1 + s / (6 * h))
    assert r.mfu * r.iteration_time_s * row.gpus * 312e12 == pytest.approx(model, rel=1e-9)


def _gpt(tp=1, sp=False, recompute="none", flash=False, b=1, s=2048, h=4096, a=32):
    return from_dict({"model": {"layers": 8, "hidden": h, "heads": a, "seq_len": s},
                      "training": {"global_batch": 8 * b, "micro_batch": b, "recompute": recompute,
                                   "flash_attention": flash},
                      "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 8, "nodes": 1},
                      "parallelism": {"tp": tp, "sequence_parallel": sp}})


def test_activation_memory_per_layer_matches_korthikanti_table_2():
    s, b, h, a = 2048, 1, 4096, 32
    sbh = s * b * h
    # No parallelism: sbh (34 + 5 a s / h)
    assert layer_cost(_gpt(), False).act_bytes == pytest.approx(sbh * (34 + 5 * a * s / h))
    # Tensor parallel t: sbh (10 + 24/t + 5 a s/(h t))
    assert layer_cost(_gpt(tp=8), False).act_bytes == pytest.approx(sbh * (10 + 24 / 8 + 5 * a * s / (h * 8)))
    # Tensor + sequence parallel: sbh/t (34 + 5 a s / h)
    assert layer_cost(_gpt(tp=8, sp=True), False).act_bytes == pytest.approx(sbh / 8 * (34 + 5 * a * s / h))
    # Selective recomputation drops the attention-score term: 34 sbh / t
    selective = layer_cost(_gpt(tp=8, sp=True, recompute="selective"), False)
    assert selective.act_bytes == pytest.approx(34 * sbh / 8)
    # Full recomputation keeps the layer input only: 2 sbh (split by t with SP)
    assert layer_cost(_gpt(tp=8, sp=True, recompute="full"), False).act_bytes == pytest.approx(2 * sbh / 8)


def test_flash_attention_removes_the_score_term():
    # FlashAttention-2 (Alg. 1) keeps one fp32 log-sum-exp per query row and head instead of the
    # 5as^2b score terms (explorer/workloads/transformer/activations_terms.py; the full derivation in
    # test_activations.py).
    assert layer_cost(_gpt(flash=True), False).act_bytes == pytest.approx(2048 * 4096 * 34 + 4 * 32 * 2048)


@pytest.mark.parametrize("preset,billions,tol", [
    ("gpt3-175b", 175.0, 0.01),      # Brown et al. 2020, Table 2.1
    ("llama3-8b", 8.03, 0.01),       # Llama 3 model card
    ("llama3-70b", 70.6, 0.01),
    ("llama3-405b", 405.9, 0.01),
    ("deepseek-v3", 671.0, 0.03),    # DeepSeek-V3 report: 671B total (MLA modelled as MHA)
    ("mixtral-8x7b", 46.7, 0.01),    # Mixtral paper: 47B total
])
def test_parameter_counts_match_published_sizes(preset, billions, tol):
    sc = from_dict({"model": {"preset": preset}, "training": {"global_batch": 8}})
    assert model_params(sc) / 1e9 == pytest.approx(billions, rel=tol)


def test_tensor_parallel_collective_volume_per_layer():
    # Megatron-LM Sec. 3: 2 all-reduces of s*b*h activations forward, 2 backward.
    lc = layer_cost(_gpt(tp=8), False)
    assert [c.op for c in lc.tp_fwd] == ["all-reduce", "all-reduce"]
    assert all(c.size_bytes == 2048 * 4096 * 2 for c in lc.tp_fwd)
    sp = layer_cost(_gpt(tp=8, sp=True), False)
    assert sorted(c.op for c in sp.tp_fwd) == ["all-gather", "all-gather", "reduce-scatter", "reduce-scatter"]
    full = layer_cost(_gpt(tp=8, recompute="full"), False)
    assert len(full.tp_recompute) == 2


@pytest.mark.parametrize("zero,expected", [
    (0, lambda P, N: 16 * P),
    (1, lambda P, N: 4 * P + 12 * P / N),     # ZeRO paper: P_os = 4Psi + K Psi / N_d
    (2, lambda P, N: 2 * P + 14 * P / N),     # P_os+g
    (3, lambda P, N: 16 * P / N),             # P_os+g+p
])
def test_zero_memory_per_gpu(zero, expected):
    # The ZeRO paper's mixed precision is fp16 with fp16 gradients (2 bytes; Megatron reduces fp16 in
    # fp16); bf16 under Megatron keeps an fp32 main_grad (tests/test_memory_grad_buffer.py).
    sc = from_dict({"model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 512},
                    "training": {"global_batch": 64, "dtype": "fp16"}, "hardware": {"gpu": "h100-sxm"},
                    "cluster": {"gpus_per_node": 8, "nodes": 2}, "parallelism": {"zero": zero}})
    r = simulate(sc)
    m = r.memory
    P = model_params(sc)
    # ZeRO-3 also holds its working set: the gathered layer, the prefetched one (bf16) and one
    # layer's full gradients (bf16) before their reduce-scatter.
    layer = 12 * 1024**2 + 4 * 1024
    working = (2 * 2 + 2) * layer if zero == 3 else 0
    assert m.params + m.grads + m.optimizer == pytest.approx(expected(P, 16) + working, rel=1e-9)


def test_zero3_moves_three_times_the_parameters_zero1_two():
    # ZeRO paper Sec. 7: stages 1-2 move 2 Psi per iteration (reduce-scatter + all-gather), stage 3
    # 3 Psi (two gathers + one reduce-scatter) — with one micro-batch per iteration.
    def dp_bytes(zero):
        sc = from_dict({"model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 8, "seq_len": 512},
                        "training": {"global_batch": 16}, "hardware": {"gpu": "h100-sxm"},
                        "cluster": {"gpus_per_node": 8, "nodes": 2}, "parallelism": {"zero": zero}})
        return simulate(sc).comm_bytes_per_gpu["dp"], sc
    (z3, sc), (z1, _) = dp_bytes(3), dp_bytes(1)
    # With bf16 parameters (2 bytes) and gradients reduced in g bytes (Megatron: fp32 for bf16,
    # frameworks.py): (2 + 2 + g) / (g + 2), which is the paper's 1.5 when g = 2.
    from explorer.taskgraph.techniques.optimizer import grad_reduce_bytes
    g = grad_reduce_bytes(sc)
    assert z3 / z1 == pytest.approx((4 + g) / (g + 2), rel=0.01)


def _cp_raw(cp, bw):
    return {"model": {"layers": 2, "hidden": 4096, "heads": 32, "vocab": 8, "seq_len": 65536},
            "training": {"global_batch": 1, "micro_batch": 1},
            "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": cp, "nodes": 1, "scale_up": {"bandwidth_GBps": bw, "latency_us": 0}},
            "parallelism": {"cp": cp, "dp": 1},
            # The gradient all-reduce over the dp x cp group runs after the backward: the ring has
            # the NVLink to itself (overlapped, the two share it and the link bound sets the
            # iteration: tests/test_utilisation_physical.py).
            "communication": {"dp_overlap": False}}


def test_ring_attention_is_exposed_only_when_transfer_outlasts_compute():
    # Ring attention (Liu et al. 2023): cp-1 hand-offs of a K,V block, each overlapped with the
    # attention of the previous block; exposed per layer (cp-1) * max(0, t_kv - t_attn/cp) forward.
    from explorer.network.topology import SCALE_UP_EFFICIENCY
    from explorer.physics.hardware import ComputeModel
    fast = simulate(from_dict(_cp_raw(4, 900)))
    assert fast.breakdown_s["cp"] == 0.0
    sc = from_dict(_cp_raw(4, 0.5))
    slow = simulate(sc)
    lc = layer_cost(sc, False)
    cm = ComputeModel.for_scenario(sc)
    t_attn = cm.time(lc.attn_core_fwd) / 4
    t_kv = lc.cp_kv_bytes / (0.5e9 * SCALE_UP_EFFICIENCY * 1 / 1)   # one pair of the ring per GPU
    kv_b = 2 * lc.cp_kv_bytes / (0.5e9 * SCALE_UP_EFFICIENCY)
    expected = 2 * 3 * (max(0, t_kv - t_attn) + max(0, kv_b - 2 * t_attn))  # 2 layers, fwd + bwd
    assert slow.breakdown_s["cp"] == pytest.approx(expected, rel=1e-6)
    # K and V of this GPU's quarter of the sequence, bf16: 2 * (s/cp) * h * (kv/heads) * 2 bytes.
    assert lc.cp_kv_bytes == 2 * 65536 / 4 * 4096 * 2


def test_tp_overlap_hides_collectives_behind_their_gemms_but_never_the_first_chunk():
    # Collective matmul (Wang et al., ASPLOS 2023): each TP collective is split in 4 chunks
    # pipelined with the GEMM it feeds; what is exposed is max(t_comm - t_gemm, t_comm / 4).
    from explorer.taskgraph.make import iteration_builder
    from explorer.taskgraph.techniques.tp_overlap import TP_OVERLAP_CHUNKS
    raw = {"model": {"layers": 2, "hidden": 8192, "heads": 64, "vocab": 8, "seq_len": 4096},
           "training": {"global_batch": 1}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"gpus_per_node": 8, "nodes": 1}, "parallelism": {"tp": 8, "sequence_parallel": True}}
    plain = iteration_builder(from_dict(raw)).chunks[0]
    raw["communication"] = {"tp_overlap": True}
    over = iteration_builder(from_dict(raw)).chunks[0]
    tp_plain = dict(plain.fwd_parts)["tp"]
    tp_over = dict(over.fwd_parts).get("tp", 0.0)
    assert tp_plain / TP_OVERLAP_CHUNKS - 1e-12 <= tp_over < tp_plain
    # Fast GEMMs against slow links: nothing left to hide behind, the full time stays exposed.
    raw["cluster"]["scale_up"] = {"bandwidth_GBps": 1}
    slow_over = iteration_builder(from_dict(raw)).chunks[0]
    raw["communication"] = {"tp_overlap": False}
    slow_plain = iteration_builder(from_dict(raw)).chunks[0]
    gemm = dict(slow_plain.fwd_parts)["compute"]
    assert dict(slow_over.fwd_parts)["tp"] == pytest.approx(dict(slow_plain.fwd_parts)["tp"] - gemm, rel=0.05)
