"""Published training throughput next to the simulator's prediction (the fidelity report).

Rows come from ``data/reference/training_runs.csv`` (sources in its header and in each row) and
from Megatron-LM SC21 Table 1 (:mod:`explorer.fidelity.calibration`).  Each row becomes a scenario with the
published setup — model, GPUs, parallel degrees, batch, precision, recomputation, framework and
the attention kernel it ran (column ``attention_kernel``, blank or ``auto``: the framework's) — on
the cluster the source describes; the prediction is the same figure the source reports:
tokens per second per GPU, model FLOPs utilisation, or (SC21) TFLOP/s per GPU.
"""
from __future__ import annotations

from typing import Any

from ..scenario import Scenario, from_dict
from ..schedules.registry import megatron_schedule
from ..simulate import Result, simulate
from .band import Regime, classify
from .calibration import megatron_rows, megatron_scenario, read_csv
from .report import ReferenceRow

SC21_GROUP = "Megatron-LM SC21 Table 1"
SC21_SOURCE = "Narayanan et al., SC21 (arXiv 2104.04473), Table 1"
UNITS = {"tokens_per_s_per_gpu": "tokens/s per GPU", "mfu": "MFU (bf16 peak)",
         "tflops_per_gpu": "TFLOP/s per GPU"}
# The scale-out fabric of each source's cluster: DGX H100 (8 x 400 Gb/s InfiniBand NDR per node),
# DGX A100 (8 x 200 Gb/s HDR), DGX B200 (8 x 400 Gb/s ConnectX-7, NDR), Meta's Llama 3 405B RoCE
# cluster (400 Gb/s per GPU; Llama 3 paper Sec. 3.3.1).
FABRIC = {"h100-sxm": "ib-ndr", "a100-80gb": "ib-hdr", "b200": "ib-ndr"}
ROCE_GROUPS = ("Llama 3 Table 4",)
MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab")


def _model(row: dict[str, str]) -> dict[str, Any]:
    """The row's model: its preset, or the dimensions it lists (GPT-3 rows keep dropout, as
    Megatron's GPT recipes do; Llama and Nemotron train without)."""
    model: dict[str, Any] = {"seq_len": int(row["seq_len"])}
    if row["model_preset"]:
        model["preset"] = row["model_preset"]
    else:
        model.update({k: int(row[k]) for k in MODEL_FIELDS})
        model["ffn_kind"] = row["ffn_kind"]
        model["dropout"] = row["label"].startswith("GPT3")
    return model


def training_raw(row: dict[str, str]) -> dict[str, Any]:
    """The scenario mapping of one ``training_runs.csv`` row."""
    gpus, vpp = int(row["gpus"]), int(row["vpp"])
    fabric = "roce-400" if row["group"].startswith(ROCE_GROUPS) else FABRIC[row["gpu"]]
    return {
        "name": f"{row['group']}: {row['label']}",
        "model": _model(row),
        "training": {"global_batch": int(row["global_batch"]), "micro_batch": int(row["micro_batch"]),
                     "dtype": row["dtype"], "recompute": row["recompute"], "framework": row["framework"],
                     "attention_kernel": row.get("attention_kernel") or "auto",
                     # (blank or absent: the GPU's default recipe)
                     **({"fp8_recipe": row["fp8_recipe"]} if row.get("fp8_recipe") else {})},
        "hardware": {"gpu": row["gpu"]},
        "cluster": {"gpus_per_node": 8, "nodes": gpus // 8, "scale_out": {"fabric": fabric}},
        "parallelism": {"tp": int(row["tp"]), "pp": int(row["pp"]), "cp": int(row["cp"]),
                        "ep": int(row["ep"]), "vpp": vpp, "schedule": megatron_schedule(vpp),
                        "zero": int(row["zero"]), "sequence_parallel": row["sequence_parallel"] == "true"},
        # TP comm-GEMM overlap as the run had it (the csv's header: NeMo's recipes turn it on).
        **({"communication": {"tp_overlap": True}} if row.get("tp_overlap") == "true" else {}),
    }


def training_scenario(row: dict[str, str]) -> Scenario:
    return from_dict(training_raw(row))


def predicted(metric: str, r: Result) -> float:
    """The simulator's value of the figure a source reports."""
    if metric == "tokens_per_s_per_gpu":
        return r.tokens_per_s / r.scenario.gpus
    if metric == "mfu":
        return r.mfu
    if metric == "tflops_per_gpu":
        return r.tflops_per_gpu
    raise ValueError(f"unknown metric {metric!r}")


def regime_key(sc: Scenario) -> tuple[str, ...] | None:
    """The regime key of a reference row's scenario (None if outside every regime)."""
    regime = classify(sc)
    return regime.key if isinstance(regime, Regime) else None


def sc21_rows() -> list[ReferenceRow]:
    """Megatron-LM SC21 Table 1 (the constants' original calibration set)."""
    out = []
    for row in megatron_rows():
        sc = megatron_scenario(row)
        r = simulate(sc)
        out.append(ReferenceRow(SC21_GROUP, f"{row.params_billion:g}B on {row.gpus} A100s",
                                row.achieved_tflops_per_gpu, r.tflops_per_gpu, UNITS["tflops_per_gpu"],
                                "calibration", SC21_SOURCE, regime_key(sc)))
    return out


def sourced_rows() -> list[ReferenceRow]:
    """Every row of ``training_runs.csv``, simulated."""
    out = []
    for row in read_csv("training_runs.csv"):
        sc = training_scenario(row)
        r = simulate(sc)
        measured = float(row["measured"])
        out.append(ReferenceRow(row["group"], row["label"], measured, predicted(row["metric"], r),
                                UNITS[row["metric"]], row["role"], row["source"], regime_key(sc)))
    return out


def training_reference_rows() -> list[ReferenceRow]:
    """SC21 Table 1 and the sourced training runs, in that order."""
    return sc21_rows() + sourced_rows()
