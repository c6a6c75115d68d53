"""Property test over seeded random scenarios: every valid combination of degrees, schedules,
ZeRO stages, algorithms and options simulates, and its breakdown sums to the iteration."""
from __future__ import annotations

import random

import pytest

from explorer.scenario import ScenarioError, from_dict
from explorer.simulate import simulate

SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe", "pipedream-async"]


def random_raw(rng: random.Random) -> dict:
    nodes, gpn = rng.choice([1, 2, 4]), rng.choice([2, 4, 8])
    moe = rng.random() < 0.3
    sched = rng.choice(SCHEDULES)
    moe_cfg = {"moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 512, "max_nodes": rng.choice([0, 1]),
                       "imbalance": rng.choice([1.0, 1.5])}} if moe else {}
    mla = {"mla": {"q_lora_rank": rng.choice([0, 256]), "kv_lora_rank": 128, "qk_nope_head_dim": 64,
                   "qk_rope_head_dim": 32, "v_head_dim": 64}} if rng.random() < 0.2 else {}
    if moe:
        moe_cfg["moe"]["skew"] = rng.choice([0.0, 0.0, 0.8])
    return {
        "model": {"layers": rng.choice([4, 8, 16]), "hidden": rng.choice([1024, 1024, 8192]), "heads": 16,
                  "vocab": 1000, "seq_len": rng.choice([512, 1024]), "dropout": rng.random() < 0.5,
                  "mtp_depth": rng.choice([0, 0, 1]), **moe_cfg, **mla},
        "training": {"global_batch": rng.choice([8, 16, 32, 64]), "micro_batch": rng.choice([1, 2]),
                     "recompute": rng.choice(["none", "selective", "full"]),
                     "flash_attention": rng.random() < 0.5,
                     "dtype": rng.choice(["bf16", "fp8"]),
                     "framework": rng.choice(["megatron", "deepspeed", "megatron-deepspeed", "fsdp"])},
        "hardware": {"gpu": rng.choice(["a100-80gb", "h100-sxm", "b200"])},
        "cluster": {"nodes": nodes, "gpus_per_node": gpn,
                    "datacenters": rng.choice([1, 2]) if nodes > 1 else 1,
                    "scale_out": {"kind": rng.choice(["fat-tree", "rail-optimized"]),
                                  "fabric": rng.choice(["ib-hdr", "ib-ndr", "roce-400", "efa", "eth-100"]),
                                  "oversubscription": rng.choice([1, 4])}},
        "parallelism": {"tp": rng.choice([1, 2, 4]), "pp": rng.choice([1, 2, 4]), "cp": rng.choice([1, 2]),
                        "ep": rng.choice([1, 2]) if moe else 1, "schedule": sched,
                        "vpp": 2 if sched == "interleaved" else 1, "zero": rng.choice([0, 1, 2, 3]),
                        "sequence_parallel": rng.random() < 0.5, "token_slices": rng.choice([1, 1, 2]),
                        "order": rng.choice(["tp-cp-ep-dp-pp", "tp-cp-pp-dp", "dp-tp-cp-pp"])},
        "communication": {"algorithm": rng.choice(["auto", "ring", "tree", "halving-doubling",
                                                   "hierarchical"]),
                          "dp_overlap": rng.random() < 0.5, "tp_overlap": rng.random() < 0.5,
                          "prefetch_layers": rng.choice([0, 1, 2]), "dp_priority": rng.random() < 0.3,
                          "library": rng.choice(["nccl", "nccl", "mpi", "gloo"]),
                          "protocol": rng.choice(["auto", "auto", "LL", "LL128", "Simple"]),
                          "comm_sms": rng.choice([0, 16, 24])},
    }


def test_random_valid_scenarios_simulate_and_account_for_every_second():
    rng = random.Random(2026)
    simulated = 0
    mfus: list[float] = []
    for _ in range(400):
        try:
            sc = from_dict(random_raw(rng))
        except ScenarioError as exc:
            assert "\n" not in str(exc)
            continue
        r = simulate(sc)
        assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
        assert min(r.breakdown_s.values()) >= -1e-12
        # MFU over the bf16 peak, and for FP8 runs over the fp8 peak, can never exceed 1 (issue 10).
        assert r.iteration_time_s > 0 and 0 < r.mfu <= 1
        assert r.mfu_fp8_peak is None or 0 < r.mfu_fp8_peak <= 1
        mfus.append(r.mfu)
        assert r.memory.total > 0
        simulated += 1
    assert simulated >= 100          # the generator must mostly produce valid scenarios
