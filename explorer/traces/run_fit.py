"""Fit the scenario's few efficiency constants to a measured iteration (``import-trace --fit``).

What a trace measures and the simulation predicts alike (explorer/traces/measure.py,
explorer/analysis/breakdown.py) are the targets:

- **compute**: time the slowest rank computes (``compute`` + ``recompute``), against the
  simulated slowest class's; fitted by ``hardware.compute_efficiency`` (the fraction of peak large
  GEMMs reach; memory-bound kernels do not move with it, physics/hardware.py);
- **each network tier**: time a collective of the tier's dimensions is in flight on the rank
  (exposed or hidden: ``comm_total_s``), against the same union of the simulated class's
  collective rows (result/timeline.py); a dimension belongs to the tier that limits its main call
  (the run's ``links[dim].tier``).  Fitted by the field that sets the tier's achievable rate:
  ``cluster.scale_up.bandwidth_GBps`` (NVLink has no separate efficiency; its busbw is what
  nccl-tests measures), ``cluster.scale_out.efficiency`` (the fraction of NIC line rate
  calibrate-fabric fits too) and ``cluster.scale_across.bandwidth_Gbps``.

Each constant is solved in turn for ``simulated == measured`` by the secant method on the logs
(time is close to inverse-proportional in each rate, so one or two steps land), bounded by the
field's range; two rounds over the constants let the tiers settle the small effects they have on
each other (a slower tier shifts when compute waits).  A target that the bounds cannot reach is
left at the bound and named.  The residual is the RMS relative error of the targets after the fit.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..analysis.intervals import union_length
from ..scenario import Scenario
from ..simulate import simulate
from ..vocabulary import COMM_DIMS, tier_of_limit
from .lanes import simulated_lanes
from .measure import Measured

Setter = Callable[[Scenario, float], Scenario]
TOLERANCE = 1e-3                # relative error at which a constant's solve stops
MAX_STEPS = 8                   # simulations per solve at most


def _hw(sc: Scenario, v: float) -> Scenario:
    return replace(sc, hardware=replace(sc.hardware, compute_efficiency=v))


def _up(sc: Scenario, v: float) -> Scenario:
    return replace(sc, cluster=replace(sc.cluster, scale_up=replace(sc.cluster.scale_up, bandwidth_GBps=v)))


def _out(sc: Scenario, v: float) -> Scenario:
    return replace(sc, cluster=replace(sc.cluster, scale_out=replace(sc.cluster.scale_out, efficiency=v)))


def _across(sc: Scenario, v: float) -> Scenario:
    c = sc.cluster
    return replace(sc, cluster=replace(c, scale_across=replace(c.scale_across, bandwidth_Gbps=v)))


@dataclass(frozen=True)
class Knob:
    """One fitted constant: its dotted field, its bounds and how to set it."""

    field: str
    lo: float
    hi: float
    set: Setter


COMPUTE = Knob("hardware.compute_efficiency", 0.01, 1.0, _hw)
# Bounds: the fields' own (config/bounds.py), scale-up as calibrate-fabric bounds it.
TIER_KNOBS = {"scale-up": Knob("cluster.scale_up.bandwidth_GBps", 1.0, 10_000.0, _up),
              "scale-out": Knob("cluster.scale_out.efficiency", 0.01, 1.0, _out),
              "scale-across": Knob("cluster.scale_across.bandwidth_Gbps", 0.001, 1e6, _across)}


def start_value(sc: Scenario, knob: Knob) -> float:
    """The scenario's own value of ``knob`` (its default resolved, as the simulation uses it)."""
    if knob is COMPUTE:
        from ..physics.hardware import default_gemm_efficiency
        return sc.hardware.compute_efficiency or default_gemm_efficiency(sc.hardware.gpu, "bf16")
    if knob.field.startswith("cluster.scale_up"):
        from ..config.loading import FALLBACK_SCALE_UP_GBPS
        return float(sc.cluster.scale_up.bandwidth_GBps or sc.hardware.gpu.scale_up_GBps
                     or FALLBACK_SCALE_UP_GBPS)
    if knob.field.startswith("cluster.scale_out"):
        from ..config.presets import resolved_scale_out
        return float(resolved_scale_out(sc.cluster.scale_out).efficiency or 1.0)
    return float(sc.cluster.scale_across.bandwidth_Gbps)


@dataclass(frozen=True)
class Simulated:
    """What the fit compares of one simulation."""

    iteration_s: float
    compute_s: float
    comm_total_s: dict[str, float]      # per dimension: time a collective of it is in flight
    tiers: dict[str, str]               # dimension -> the tier limiting its main call


def simulated(sc: Scenario) -> Simulated:
    """Simulate ``sc`` and measure its slowest class as import-trace measures a rank
    (explorer/traces/lanes.py: its own collectives and the transfers its compute waits for)."""
    res = simulate(sc)
    b = res.breakdown_s
    lanes = simulated_lanes(res)
    # A call's limit as its tier (vocabulary.tier_of_limit): a latency-bound call is its outermost
    # tier's, a call its GPUs' PCIe links limit crosses the node boundary and is fitted as the
    # scale-out tier's, whose efficiency calibrates the fabric (the links' rate is the GPU's figure).
    tiers = {d: tier_of_limit(str(v.get("tier")))
             for d, v in res.links.items() if d in COMM_DIMS and v.get("tier")}
    return Simulated(iteration_s=res.iteration_time_s,
                     compute_s=b.get("compute", 0.0) + b.get("recompute", 0.0),
                     comm_total_s={d: union_length(lanes[d]) for d in COMM_DIMS}, tiers=tiers)


def tier_times(dims: dict[str, float], tiers: dict[str, str]) -> dict[str, float]:
    """Per tier, the summed in-flight time of its dimensions (dimensions with no tier dropped)."""
    out: dict[str, float] = {}
    for d, t in dims.items():
        if t > 0 and d in tiers and tiers[d] in TIER_KNOBS:
            out[tiers[d]] = out.get(tiers[d], 0.0) + t
    return out


@dataclass(frozen=True)
class Target:
    name: str                  # "compute" or a tier
    field: str
    measured_s: float
    before_s: float            # simulated with the scenario's own constants
    after_s: float             # simulated with the fitted ones

    @property
    def error(self) -> float:
        return self.after_s / self.measured_s - 1


@dataclass(frozen=True)
class RunFit:
    """The fitted constants, the targets before and after, and the residual."""

    fields: dict[str, float]
    start: dict[str, float]
    targets: tuple[Target, ...]
    at_bound: tuple[str, ...]           # fields whose target lies beyond their bounds
    iteration_s: dict[str, float]       # measured, before, after
    simulations: int

    @property
    def residual(self) -> float:
        """RMS relative error of the targets after the fit."""
        errs = [t.error for t in self.targets]
        return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else 0.0

    @property
    def residual_before(self) -> float:
        errs = [t.before_s / t.measured_s - 1 for t in self.targets]
        return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"fields": dict(self.fields), "start": dict(self.start), "residual": self.residual,
                "residual_before": self.residual_before, "at_bound": list(self.at_bound),
                "targets": [{"name": t.name, "field": t.field, "measured_s": t.measured_s,
                             "simulated_before_s": t.before_s, "simulated_s": t.after_s,
                             "relative_error": t.error} for t in self.targets],
                "iteration_time_s": dict(self.iteration_s), "simulations": self.simulations}


class _Counter:
    """simulated(), counting its calls (the fit reports how many simulations it took)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, sc: Scenario) -> Simulated:
        self.calls += 1
        return simulated(sc)


def _solve(sc: Scenario, knob: Knob, x0: float, measure: Callable[[Simulated], float], target: float,
           sim: _Counter) -> tuple[float, bool]:
    """``knob``'s value at which ``measure(simulated)`` equals ``target``: the secant method on
    (log value, log time), from the value ``x0`` and its inverse-proportional guess.  Returns the
    value and whether it is pinned at a bound the target lies beyond."""
    lo, hi = math.log(knob.lo), math.log(knob.hi)

    def g(u: float) -> float:
        t = measure(sim(knob.set(sc, math.exp(u))))
        return math.log(t / target) if t > 0 else -math.inf

    u0 = min(max(math.log(x0), lo), hi)
    g0 = g(u0)
    if not math.isfinite(g0):
        return math.exp(u0), False
    u1 = min(max(u0 + g0, lo), hi)       # time ~ 1 / rate: log rate moves by the log error
    for _ in range(MAX_STEPS):
        if abs(g0) < TOLERANCE or u1 == u0:
            break
        g1 = g(u1)
        if not math.isfinite(g1) or abs(g1) < TOLERANCE:
            u0, g0 = u1, g1 if math.isfinite(g1) else g0
            break
        slope = (g1 - g0) / (u1 - u0)
        # Time falls as the rate rises; a flat or wrong-signed slope (a latency-bound tier, or a
        # knob the tier does not read) falls back to inverse proportion.
        step = -g1 / slope if slope < -1e-6 else g1
        u0, g0, u1 = u1, g1, min(max(u1 + step, lo), hi)
    pinned = abs(g0) >= 0.01 and ((u0 >= hi and g0 > 0) or (u0 <= lo and g0 < 0))
    return math.exp(u0), pinned


def _tier_time(tier: str) -> Callable[[Simulated], float]:
    def of(s: Simulated) -> float:
        return tier_times(s.comm_total_s, s.tiers).get(tier, 0.0)
    return of


def fit_run(sc: Scenario, measured: Measured, rounds: int = 2) -> RunFit:
    """Fit compute efficiency and each crossed tier's rate so the simulation of ``sc`` reproduces
    ``measured`` (module docstring); ValueError when the trace has no compute to fit."""
    sim = _Counter()
    base = sim(sc)
    m_compute = measured.categories.get("compute", 0.0) + measured.categories.get("recompute", 0.0)
    if m_compute <= 0:
        raise ValueError("the trace has no compute in its iterations: nothing to fit")
    m_tiers = tier_times(measured.comm_total_s, base.tiers)
    s_tiers = tier_times(base.comm_total_s, base.tiers)
    tiers = [t for t in TIER_KNOBS if m_tiers.get(t, 0.0) > 0 and s_tiers.get(t, 0.0) > 0]
    knobs: list[tuple[str, Knob, Callable[[Simulated], float], float]] = [
        ("compute", COMPUTE, lambda s: s.compute_s, m_compute)]
    knobs += [(t, TIER_KNOBS[t], _tier_time(t), m_tiers[t]) for t in tiers]
    start = {k.field: start_value(sc, k) for _, k, _, _ in knobs}
    values = dict(start)
    pinned: dict[str, bool] = {}
    cur = sc
    for _ in range(rounds):
        for _, knob, measure, target in knobs:
            v, pinned[knob.field] = _solve(cur, knob, values[knob.field], measure, target, sim)
            values[knob.field] = v
            cur = knob.set(cur, v)
    # Four significant digits: the fit is good to about 0.1 %, and links and files stay readable.
    values = {k: float(f"{v:.4g}") for k, v in values.items()}
    by_field = {knob.field: knob for _, knob, _, _ in knobs}
    cur = sc
    for f, v in values.items():
        cur = by_field[f].set(cur, v)
    after = sim(cur)
    targets = tuple(Target(name, knob.field, target, measure(base), measure(after))
                    for name, knob, measure, target in knobs)
    return RunFit(fields=values, start=start, targets=targets,
                  at_bound=tuple(f for f, p in pinned.items() if p),
                  iteration_s={"measured": measured.iteration_s, "before": base.iteration_s,
                               "after": after.iteration_s}, simulations=sim.calls)


def fitted_scenario(sc: Scenario, fit: RunFit) -> Scenario:
    """``sc`` with the fitted constants set."""
    by_field = {COMPUTE.field: COMPUTE, **{k.field: k for k in TIER_KNOBS.values()}}
    for f, v in fit.fields.items():
        sc = by_field[f].set(sc, v)
    return sc


def fit_text(f: RunFit) -> str:
    """The fit as the CLI prints it: each constant from -> to, each target before and after."""
    lines = [f"fit to the trace ({f.simulations} simulations): RMS error of the fitted times "
             f"{f.residual_before:.1%} -> {f.residual:.1%}"]
    lines += [f"  {k:36} {f.start[k]:10.4g} -> {v:10.4g}" + ("  (at its bound)" if k in f.at_bound else "")
              for k, v in f.fields.items()]
    lines.append(f"  {'time in':36} {'measured':>10} {'before':>10} {'after':>10}")
    lines += [f"  {t.name:36} {t.measured_s * 1e3:8.3f}ms {t.before_s * 1e3:8.3f}ms {t.after_s * 1e3:8.3f}ms"
              for t in f.targets]
    it = f.iteration_s
    lines.append(f"  {'iteration':36} {it['measured'] * 1e3:8.3f}ms {it['before'] * 1e3:8.3f}ms "
                 f"{it['after'] * 1e3:8.3f}ms")
    return "\n".join(lines)
