"""Published measurements as scenarios, for fitting and checking the default constants.

The CSV files in ``data/reference`` are copies of the project's calibration set (sources in their
header comments): Megatron-LM SC21 Table 1 and nccl-tests bus bandwidths on single 8-GPU nodes.
``bench/calibrate.py`` prints predicted against measured values; the tests assert the tolerance.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..scenario import Scenario, from_dict
from ..schedules.registry import DEFAULT as DEFAULT_SCHEDULE  # Megatron-LM's 1F1B, which the rows ran

REFERENCE_DIR = Path(__file__).parents[1] / "data" / "reference"


def read_csv(name: str) -> list[dict[str, str]]:
    """Rows of a reference CSV, skipping its ``#`` comment header."""
    with open(REFERENCE_DIR / name, encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


@dataclass(frozen=True)
class MegatronRow:
    params_billion: float
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    dp: int
    gpus: int
    global_batch: int
    achieved_tflops_per_gpu: float


def megatron_rows() -> list[MegatronRow]:
    out = []
    for r in read_csv("megatron_sc21_table1.csv"):
        out.append(MegatronRow(float(r["params_billion"]), int(r["heads"]), int(r["hidden"]),
                               int(r["layers"]), int(r["tp"]), int(r["pp"]), int(r["dp"]), int(r["gpus"]),
                               int(r["global_batch"]),
                               float(r["achieved_tflops_per_gpu"])))
    return out


def megatron_raw(row: MegatronRow) -> dict[str, Any]:
    """The SC21 setup of one Table 1 row: A100 80GB on Selene (DGX A100: NVSwitch 300 GB/s per GPU,
    8 x 200 Gb/s HDR InfiniBand per node), fp16 mixed precision, full activation recomputation,
    no fused attention (2021), micro-batch 1, 1F1B, gradient all-reduce after the backward (the
    Megatron-LM DDP of the time did not overlap it) and no ZeRO."""
    return {
        "name": f"Megatron-LM SC21 Table 1: {row.params_billion:g}B on {row.gpus} A100s",
        "model": {"layers": row.layers, "hidden": row.hidden, "heads": row.heads, "vocab": 51200,
                  "seq_len": 2048, "tied_embeddings": True},
        "training": {"global_batch": row.global_batch, "micro_batch": 1, "dtype": "fp16",
                     "recompute": "full", "flash_attention": False},
        "hardware": {"gpu": "a100-80gb"},
        "cluster": {"gpus_per_node": 8, "nodes": row.gpus // 8,
                    "scale_up": {"kind": "nvswitch", "bandwidth_GBps": 300},
                    "scale_out": {"kind": "fat-tree", "fabric": "ib-hdr", "nics_per_node": 8}},
        "parallelism": {"tp": row.tp, "pp": row.pp, "dp": row.dp, "schedule": DEFAULT_SCHEDULE, "zero": 0},
        "communication": {"algorithm": "auto", "dp_overlap": False},
    }


def megatron_scenario(row: MegatronRow) -> Scenario:
    return from_dict(megatron_raw(row))
