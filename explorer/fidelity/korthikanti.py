"""Korthikanti et al. 2022 Table 5 as scenarios: the four GPT models on their published layouts.

Rows come from ``data/reference/korthikanti_table5.csv`` (sources in its header): Table 3's shapes
and layouts (tensor, pipeline and data parallel degrees, virtual stages, micro-batch, global
batch) and Table 5's iteration seconds with full recomputation and with selective recomputation
plus sequence parallelism.  Each row is the SC21 setup of :func:`calibration.megatron_raw`
(A100 80 GB on Selene, fp16, no fused attention, no overlap of the gradient reduction) with the
row's layout; more than one virtual stage runs Megatron-LM's interleaved schedule
(:func:`schedules.registry.megatron_schedule`).  ``bench/korthikanti.py`` times these rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..schedules.registry import megatron_schedule
from .calibration import MegatronRow, megatron_raw, read_csv

SOURCE = "Korthikanti et al., MLSys 2023 (arXiv 2205.05198), Tables 3 and 5"


@dataclass(frozen=True)
class Table5Row:
    """One Table 5 measurement and the layout it ran on."""

    model: str                  # "22B", "175B", "530B", "1T"
    heads: int
    hidden: int
    layers: int
    gpus: int
    tp: int
    pp: int
    dp: int
    vpp: int                    # virtual stages per GPU (Megatron-LM's interleaved schedule above 1)
    micro_batch: int
    global_batch: int
    recompute: str              # full | selective
    sequence_parallel: bool
    measured_s: float           # Table 5: seconds per iteration

    @property
    def schedule(self) -> str:
        """The pipeline schedule Megatron-LM runs for this row's virtual stages."""
        return megatron_schedule(self.vpp)

    @property
    def label(self) -> str:
        """Short row name: the model and ``full`` or ``sel+SP``."""
        return f"{self.model} {'sel+SP' if self.recompute == 'selective' else 'full'}"


def table5_rows() -> list[Table5Row]:
    """Every row of ``korthikanti_table5.csv``, in file order."""
    return [Table5Row(r["model"], int(r["heads"]), int(r["hidden"]), int(r["layers"]), int(r["gpus"]),
                      int(r["tp"]), int(r["pp"]), int(r["dp"]), int(r["vpp"]), int(r["micro_batch"]),
                      int(r["global_batch"]), r["recompute"], r["sequence_parallel"] == "true",
                      float(r["measured_s"]))
            for r in read_csv("korthikanti_table5.csv")]


def table5_raw(row: Table5Row, global_batch: int | None = None) -> dict[str, Any]:
    """The scenario mapping of ``row`` (``global_batch`` replaces the published one when given:
    the bench's 1T row at 4,096 micro-batches)."""
    gb = global_batch or row.global_batch
    raw = megatron_raw(MegatronRow(0.0, row.heads, row.hidden, row.layers, row.tp, row.pp, row.dp, row.gpus,
                                   gb, 0.0))
    sel = row.recompute == "selective"
    raw["name"] = f"Korthikanti Table 5: {row.model} ({'selective + SP' if sel else 'full'})"
    raw["training"].update(micro_batch=row.micro_batch, recompute=row.recompute)
    raw["parallelism"].update(vpp=row.vpp, schedule=row.schedule, sequence_parallel=row.sequence_parallel)
    return raw
