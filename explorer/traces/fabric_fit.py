"""Fit a fabric's few constants to a measured nccl-tests curve, through the explorer's own pricing.

Each candidate is priced exactly as ``python -m explorer collective`` prices a call
(explorer/network/nccl_table.collective_rows: NCCL's algorithm and protocol choice, the tier's
latency and bandwidth), on the scenario's cluster resized to the run's ranks and hosts, so the
fitted constants mean in a simulation what they meant in the fit.  Across nodes the scale-out
fabric's ``efficiency`` (fraction of NIC line rate, bounded 0.01..1) and ``latency_us`` (0.1..1000)
are fitted; on one node the scale-up ``bandwidth_GBps`` (1..10,000) and ``latency_us`` (0.01..100).

The objective is least squares on log(time_model / time_measured) over every row: a relative
error, so the 8-byte rows (latency) and the 8-GiB rows (bandwidth) weigh alike, and in time, not
busbw, because nccl-tests rounds small busbw to 0.00.  The minimiser is a 9 x 9 grid on the
log-scaled box, then golden-section line searches on each constant in turn (the objective is
piecewise smooth: NCCL switches algorithm and protocol with size, explorer/network/nccl_tuning.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..network.nccl_table import collective_rows
from ..scenario import Scenario
from .nccl_tests import NcclTestsRun

MIB = 1 << 20
GOLDEN = (math.sqrt(5) - 1) / 2
# name -> (bounds, how to set it on the scenario)
_Setter = Callable[[Scenario, float], Scenario]


def _out(sc: Scenario, **kw: Any) -> Scenario:
    return replace(sc, cluster=replace(sc.cluster, scale_out=replace(sc.cluster.scale_out, **kw)))


def _up(sc: Scenario, **kw: Any) -> Scenario:
    return replace(sc, cluster=replace(sc.cluster, scale_up=replace(sc.cluster.scale_up, **kw)))


SCALE_OUT: dict[str, tuple[tuple[float, float], _Setter]] = {
    "efficiency": ((0.01, 1.0), lambda sc, v: _out(sc, efficiency=v)),
    "latency_us": ((0.1, 1000.0), lambda sc, v: _out(sc, latency_us=v)),
}
SCALE_UP: dict[str, tuple[tuple[float, float], _Setter]] = {
    "bandwidth_GBps": ((1.0, 10_000.0), lambda sc, v: _up(sc, bandwidth_GBps=v)),
    "latency_us": ((0.01, 100.0), lambda sc, v: _up(sc, latency_us=v)),
}


@dataclass(frozen=True)
class FabricFit:
    tier: str                           # "scale-out" or "scale-up"
    fields: dict[str, float]            # the fitted constants
    preset: dict[str, object]           # the tier's other fields, as the scenario has them
    rms: float                          # RMS relative busbw error over every row
    max_from_1mib: float                # largest |relative busbw error| of the rows >= 1 MiB
    rows: tuple[dict, ...]              # size, measured and fitted busbw, relative error
    op: str
    ranks: int
    start: dict[str, float]             # the scenario's own values, before the fit
    rms_before: float                   # RMS relative busbw error with those values

    def to_json(self) -> dict:
        return {"fabric": {"tier": self.tier, **self.preset, **self.fields}, "residual": self.rms,
                "residual_max_from_1MiB": self.max_from_1mib, "op": self.op, "ranks": self.ranks,
                "before": {**self.start, "residual": self.rms_before}, "rows": list(self.rows)}

    def overrides(self) -> dict[str, float]:
        """Dotted keys of the fitted constants (``--set`` form)."""
        prefix = "cluster.scale_out." if self.tier == "scale-out" else "cluster.scale_up."
        return {prefix + k: v for k, v in self.fields.items()}


def _model_times(sc: Scenario, op: str, ranks: int, sizes: list[int]) -> list[float]:
    return [r["time_s"] * 1e6 for r in collective_rows(sc, op, ranks, sizes)]


def fit(sc: Scenario, run: NcclTestsRun, op: str, ranks: int) -> FabricFit:
    """The constants of the tier the run crosses that best reproduce its times (``sc`` already
    has the run's ranks per node and enough nodes)."""
    multi = ranks > sc.cluster.gpus_per_node
    params = SCALE_OUT if multi else SCALE_UP
    rows = [r for r in run.rows if r.time_us > 0 and r.size_bytes > 0]
    sizes = [r.size_bytes for r in rows]
    measured = [r.time_us for r in rows]

    def cost(values: dict[str, float]) -> float:
        s = sc
        for k, v in values.items():
            s = params[k][1](s, v)
        model = _model_times(s, op, ranks, sizes)
        return sum(math.log(m / t) ** 2 for m, t in zip(model, measured, strict=True))

    logb = {k: (math.log(lo), math.log(hi)) for k, ((lo, hi), _) in params.items()}
    names = list(params)
    grid = 9
    best, best_cost = None, math.inf

    def point(k: str, i: int) -> float:
        lo, hi = logb[k]
        return math.exp(lo + (hi - lo) * i / (grid - 1))
    for i in range(grid):
        for j in range(grid):
            cand = {names[0]: point(names[0], i), names[1]: point(names[1], j)}
            c = cost(cand)
            if c < best_cost:
                best, best_cost = cand, c
    assert best is not None
    for _ in range(3):
        for k in names:
            best = _golden(cost, best, k, logb[k])
    s = sc
    for k, v in best.items():
        s = params[k][1](s, v)
    fitted = _model_times(s, op, ranks, sizes)
    before = _model_times(sc, op, ranks, sizes)
    rms_before = math.sqrt(sum((m / t - 1) ** 2 for m, t in zip(measured, before, strict=True)) / len(rows))
    out_rows, errs, big = [], [], []
    for r, t in zip(rows, fitted, strict=True):
        # busbw is proportional to 1 / time at a given size and op (nccl-tests doc/PERFORMANCE.md).
        rel = r.time_us / t - 1
        out_rows.append({"size_bytes": r.size_bytes, "busbw_GBps": r.busbw_GBps,
                         "fitted_busbw_GBps": r.busbw_GBps * r.time_us / t, "relative_error": rel})
        errs.append(rel)
        if r.size_bytes >= MIB:
            big.append(abs(rel))
    tier_obj = sc.cluster.scale_out if multi else sc.cluster.scale_up
    preset = {k: v for k, v in vars(tier_obj).items() if k not in params and v is not None}
    return FabricFit(tier="scale-out" if multi else "scale-up", fields=best, preset=preset,
                     rms=math.sqrt(sum(e * e for e in errs) / len(errs)), max_from_1mib=max(big, default=0.0),
                     rows=tuple(out_rows), op=op, ranks=ranks,
                     start={k: float(getattr(tier_obj, k)) for k in params}, rms_before=rms_before)


def _golden(cost: Callable[[dict[str, float]], float], at: dict[str, float], key: str,
            bounds: tuple[float, float], iters: int = 30) -> dict[str, float]:
    """Golden-section search on log(``key``) within ``bounds`` (logs), the other constants fixed;
    keeps ``at`` if the search finds nothing better (the objective need not be unimodal)."""
    def f(x: float) -> float:
        return cost({**at, key: math.exp(x)})
    a, b = bounds
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = f(d)
    x = c if fc < fd else d
    return {**at, key: math.exp(x)} if f(x) < cost(at) else at
