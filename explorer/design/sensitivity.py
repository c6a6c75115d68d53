"""Sensitivity: which 2x hardware upgrade buys the most.

Each change is a set of field overrides computed from the loaded scenario (so a default filled from
a preset — a fabric's NIC speed, a GPU's NVLink bandwidth — is doubled too), scored with the full
engine's figures (about ten variants; scores.score_exact prices them with the estimator, equal to
the simulation to 1e-9, and simulates the rows it does not price):

==================  ====================================================================
change              fields
==================  ====================================================================
2x compute          hardware.gpu peak_tflops, fp8_tflops and the measured GEMM throughputs
                    (the measured/peak ratio sets GEMM efficiency, so all double together)
2x HBM bandwidth    hardware.gpu.hbm_GBps
2x scale-up bw      cluster.scale_up.bandwidth_GBps
2x scale-out bw     cluster.scale_out.nic_Gbps, and hardware.gpu.pcie_GBps when set (the GPU's
                    PCIe link is the first stage of its path to the NICs)
2x scale-across bw  cluster.scale_across.bandwidth_Gbps
1/2 latency         cluster.scale_up.latency_us, cluster.scale_out.latency_us,
                    cluster.scale_across.latency_ms (one change each)
==================  ====================================================================

``speedup`` = base time / new time: above 1 the upgrade helps.  A tier the scenario never crosses
(scale-out on one node, scale-across in one datacenter) gives exactly 1.0: the engine does not
read it.

A change the scenario cannot express is not run and is listed with its reason: datacenters that
name their own GPU presets (``cluster.datacenters``, explorer/variants/hetero.py) take each GPU's figures
from its preset, so there compute, HBM bandwidth and (with presets other than ``hardware.gpu``)
scale-up bandwidth cannot be doubled, and 2x scale-out doubles the NICs only (each preset keeps
its PCIe link).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..estimate.equivalence import unread_fields
from ..scenario import Scenario, ScenarioError
from ..serving.guard import refuse_serving
from ..variants.hetero import dc_gpu
from .base import Base
from .capacity import least_capacity_GB
from .progress import Progress, next_phase
from .scores import score_exact

Change = Callable[[Scenario], dict[str, Any]]


def _compute(sc: Scenario) -> dict[str, Any]:
    g = sc.hardware.gpu
    out: dict[str, Any] = {"hardware.gpu.peak_tflops": 2 * g.peak_tflops,
                           "hardware.gpu.fp8_tflops": 2 * (g.fp8_tflops or g.peak_tflops)}
    # The measured largest-GEMM figures are the ceilings GEMM efficiency is taken from
    # (hardware.py measured_over_peak): doubling the peak alone would halve the efficiency instead.
    if g.measured_matmul_tflops:
        out["hardware.gpu.measured_matmul_tflops"] = 2 * g.measured_matmul_tflops
    if g.measured_fp8_matmul_tflops:
        out["hardware.gpu.measured_fp8_matmul_tflops"] = 2 * g.measured_fp8_matmul_tflops
    if g.fp32_tflops:
        out["hardware.gpu.fp32_tflops"] = 2 * g.fp32_tflops
    return out


def _filled(value: float | None) -> float:
    """A link field the defaults fill on loading (config/loading.py): never None on a loaded scenario."""
    assert value is not None
    return value


def _scale_out(sc: Scenario) -> dict[str, Any]:
    # The GPU's PCIe link is the first stage of the path to the fabric (collectives.pcie_time): a
    # faster network means a faster path, or doubling the NICs behind a saturated link buys nothing.
    # Datacenters of GPU presets read their own presets' links (module docstring).
    out: dict[str, Any] = {"cluster.scale_out.nic_Gbps": 2 * _filled(sc.cluster.scale_out.nic_Gbps)}
    if sc.hardware.gpu.pcie_GBps and not sc.cluster.datacenter_gpus:
        out["hardware.gpu.pcie_GBps"] = 2 * sc.hardware.gpu.pcie_GBps
    return out


CHANGES: dict[str, Change] = {
    "2x compute": _compute,
    "2x HBM bandwidth": lambda sc: {"hardware.gpu.hbm_GBps": 2 * sc.hardware.gpu.hbm_GBps},
    "2x scale-up bandwidth": lambda sc: {
        "cluster.scale_up.bandwidth_GBps": 2 * _filled(sc.cluster.scale_up.bandwidth_GBps)},
    "2x scale-out bandwidth": lambda sc: _scale_out(sc),
    "2x scale-across bandwidth": lambda sc: {
        "cluster.scale_across.bandwidth_Gbps": 2 * sc.cluster.scale_across.bandwidth_Gbps},
    "1/2 scale-up latency": lambda sc: {"cluster.scale_up.latency_us": sc.cluster.scale_up.latency_us / 2},
    "1/2 scale-out latency": lambda sc: {
        "cluster.scale_out.latency_us": _filled(sc.cluster.scale_out.latency_us) / 2},
    "1/2 scale-across latency": lambda sc: {
        "cluster.scale_across.latency_ms": sc.cluster.scale_across.latency_ms / 2},
}


@dataclass(frozen=True)
class Row:
    """One upgrade: its name, the overrides that make it, the new time and base time / new time (of
    the time per step: the iteration, or the amortised step of replicas synchronising apart)."""

    change: str
    overrides: dict[str, Any]
    iteration_time_s: float
    speedup: float
    breakdown_s: dict[str, float]
    time_per_step_s: float | None = None       # None: the iteration
    memory_GB_total: float = float("nan")      # the busiest GPU's memory under the change
    fits: bool = True                          # ... within the GPU's

    @property
    def step_s(self) -> float:
        return self.iteration_time_s if self.time_per_step_s is None else self.time_per_step_s

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "iteration_time_s": self.iteration_time_s, "speedup": self.speedup,
                "overrides": self.overrides, "breakdown_s": self.breakdown_s, "time_per_step_s": self.step_s,
                "memory_GB_total": self.memory_GB_total, "fits": self.fits}


@dataclass(frozen=True)
class Skipped:
    """A change the scenario cannot express (module docstring) and the one-line reason."""

    change: str
    reason: str


@dataclass(frozen=True)
class Sensitivity:
    """The base iteration, one row per change run, sorted by speedup (largest first), and the
    changes not run."""

    base_time_s: float
    base_breakdown_s: dict[str, float]
    rows: tuple[Row, ...]
    skipped: tuple[Skipped, ...] = ()
    per_step: bool = False          # the times are amortised steps (replicas synchronising apart)
    base_memory_GB: float = float("nan")   # the base's busiest GPU's memory ...
    capacity_GB: float = float("inf")      # ... and the GPU's (the smallest board's on a mixed cluster)
    base_fits: bool = True

    def memory_note(self) -> str | None:
        """One line when the base does not fit in the GPU's memory (None when it does): its upgrades
        are then gains of a layout that cannot run as set (a hunt found them ranked unsaid)."""
        if self.base_fits:
            return None
        return (f"the base needs {self.base_memory_GB:.1f} of {self.capacity_GB:.1f} GB per GPU: it does not "
                "fit, so these are the gains of a layout that cannot run as set")


def _expressible(sc: Scenario, ov: dict[str, Any]) -> str | None:
    """Why ``ov`` cannot change ``sc`` (None when it can): figures of datacenters' GPU presets —
    their compute, memory and links, and the NVLink bandwidth of every datacenter whose preset is
    not ``hardware.gpu`` (hetero.on_gpu), so cluster.scale_up would double only part of it."""
    names = sc.cluster.datacenter_gpus
    if not names:
        return None
    gpus = [dc_gpu(sc, d) for d in range(sc.cluster.datacenters)]
    preset_links = any(g != sc.hardware.gpu and g.scale_up_GBps is not None for g in gpus)
    if any(k.startswith("hardware.gpu.") or (k == "cluster.scale_up.bandwidth_GBps" and preset_links)
           for k in ov):
        presets = ", ".join(dict.fromkeys(names))
        return (f"cluster.datacenters: the datacenters' GPUs are presets ({presets}), whose figures a "
                "change cannot scale; compare other presets instead (diff --set-b)")
    return None


def sensitivity(base: Base, changes: dict[str, Change] | None = None,
                progress: Progress | None = None) -> Sensitivity:
    """Simulate ``base`` and each change (default :data:`CHANGES`) with the full engine; a change
    the scenario cannot express, or that leaves it invalid, is skipped with its reason.
    ``progress`` counts the simulations (the base's and each change's).  A serving scenario is
    refused in one line: the rows would rank its decode step alone, not TTFT or requests/s (a hunt
    found 2x scale-up bandwidth at -6 % where TTFT fell 22 %)."""
    refuse_serving(base.raw, "sensitivity", "a training step's time after each upgrade")
    sc = base.scenario()
    changes = CHANGES if changes is None else changes
    overrides: dict[str, dict[str, Any]] = {}
    built: list[Scenario] = []
    skipped: list[Skipped] = []
    for name, fn in changes.items():
        ov = fn(sc)
        why = _expressible(sc, ov)
        if why is None:
            try:
                built.append(base.scenario(ov))
                overrides[name] = ov
                continue
            except ScenarioError as exc:
                why = str(exc)
        skipped.append(Skipped(name, why))
    # A change of network fields the scenario never reads (a WAN with one datacenter, the fabric of
    # one NVLink domain: estimate/equivalence.py) is the base itself: its simulation is reused.
    unread = unread_fields(sc)
    slot = {name: 0 if set(ov) <= unread else None for name, ov in overrides.items()}
    variants = [sc]
    for sc_v, name in zip(built, overrides, strict=True):
        if slot[name] is None:
            slot[name] = len(variants)
            variants.append(sc_v)
    # Validated scenarios within the budget: never refused.
    s, _ = score_exact(variants,
                       progress=next_phase(progress, "scoring", "scenarios", len(variants)) or progress)
    # The time per step: the iteration, or where replicas synchronise apart the amortised step (the
    # WAN a streaming-DiLoCo sync crosses read "1.000x" on its inner steps alone).
    step = s.step_s()
    t0 = float(step[0])
    rows = []
    for name, ov in overrides.items():
        k = int(slot[name] or 0)
        t = float(step[k])
        row = s.row(k)
        rows.append(Row(name, ov, float(s.iteration_time_s[k]), t0 / t, row["breakdown_s"], t,
                        row["memory_GB_total"], row["fits"]))
    rows.sort(key=lambda r: -r.speedup)
    per_step = bool((step != s.iteration_time_s).any())
    first = s.row(0)
    return Sensitivity(t0, first["breakdown_s"], tuple(rows), tuple(skipped), per_step,
                       first["memory_GB_total"], least_capacity_GB(sc), first["fits"])
