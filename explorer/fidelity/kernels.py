"""Published GEMM throughputs next to explorer/physics/kernels.py's prediction for the same shape.

Each row of explorer/data/reference/gemm_benchmarks.csv (sources in its header) is one isolated
GEMM: the prediction is 2*m*n*k / ``gemm_seconds`` with ``large_efficiency`` = the GPU's
``measured_over_peak`` for the dtype (hardware.py) — the benchmark ceiling, at the burst clock, without
the sustained-clock factor (physics/power.sustained_fraction) that applies inside a training step.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from ..physics.hardware import measured_over_peak
from ..physics.kernels import gemm_seconds
from ..physics.power import clock_fraction
from ..scenario import GPU, gpu_presets
from .report import ReferenceRow, summary

CSV_PATH = Path(__file__).parents[1] / "data" / "reference" / "gemm_benchmarks.csv"
GROUP = "GEMM throughput (isolated kernel)"


@dataclass(frozen=True)
class GemmBenchmark:
    """One published GEMM measurement (a row of gemm_benchmarks.csv)."""

    gpu: str
    dtype: str
    m: int
    n: int
    k: int
    group: int
    measured_tflops: float
    role: str
    source: str
    power_cap_W: float | None = None      # the GPU's power limit when below its board power


def load_benchmarks(path: Path = CSV_PATH) -> list[GemmBenchmark]:
    """The CSV's rows, ``#`` comment lines skipped."""
    with path.open() as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        rows.append(GemmBenchmark(r["gpu"], r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]),
                                  int(r.get("group") or 1), float(r["measured_tflops"]), r["role"],
                                  r["source"], float(r["power_cap_W"]) if r.get("power_cap_W") else None))
    return rows


@cache
def preset_gpu(name: str) -> GPU:
    """GPU preset ``name`` from explorer/data/gpus.yaml, fp8 peak defaulting to the bf16 peak."""
    raw = gpu_presets()[name]
    known = {f.name for f in fields(GPU)}
    gpu = GPU(**{k: v for k, v in raw.items() if k in known})
    if not gpu.fp8_tflops:
        gpu = GPU(**{**{f.name: getattr(gpu, f.name) for f in fields(GPU)}, "fp8_tflops": gpu.peak_tflops})
    return gpu


def predicted_tflops(b: GemmBenchmark) -> float:
    """kernels.py's throughput for the row's shape, at the GPU's isolated-GEMM ceiling (times the
    clock a power cap below the board power leaves, physics/power.py)."""
    gpu = preset_gpu(b.gpu)
    eff = measured_over_peak(gpu, b.dtype) * clock_fraction(gpu, b.power_cap_W)
    t = gemm_seconds(b.m, b.n, b.k, b.dtype, gpu, eff, b.group)
    return 2.0 * b.m * b.n * b.k / t / 1e12


def gemm_reference_rows() -> list[ReferenceRow]:
    """Every sourced GEMM row with the simulator's prediction, for the fidelity report."""
    out = []
    for b in load_benchmarks():
        shape = f"{b.m}x{b.n}x{b.k}" + (f" x{b.group} groups" if b.group > 1 else "")
        shape += f" at {b.power_cap_W:g} W" if b.power_cap_W else ""
        out.append(ReferenceRow(GROUP, f"{b.gpu} {b.dtype} {shape}", b.measured_tflops,
                                predicted_tflops(b), "TFLOP/s", b.role, b.source))
    return out


if __name__ == "__main__":
    rows = gemm_reference_rows()
    for r in rows:
        print(f"{r.role:11s} {r.label:42s} measured {r.measured:7.1f} predicted {r.predicted:7.1f} "
              f"error {r.error:+6.1%}")
    for role in ("calibration", "validation"):
        mean, worst, n = summary(rows, role)
        print(f"{role}: {n} rows, mean |error| {mean:.1%}, max {worst:.1%}")
