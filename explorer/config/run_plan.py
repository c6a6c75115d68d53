"""The whole run, beyond one iteration (issue 38): ``training.phases``, ``training.total_tokens`` and
the ``reliability`` section.

- ``training.phases``: an ordered list of phases, each ``{name, tokens | steps, overrides}`` where
  ``overrides`` maps dotted keys to values exactly as ``--set`` does (explorer/config/overrides.py):
  a phase is the scenario with its overrides applied (a batch ramp, a longer context, more GPUs).
  The keys are checked at load (explorer/config/run_rules.py); each phase's scenario is built and
  simulated by explorer/run/phases.py.
- ``training.total_tokens``: a single-phase run of the scenario as it is.
- ``reliability``: failures, checkpoints and restarts (Young 1974; Daly 2006), the datacenter's PUE
  and an optional price; the goodput and energy are computed in explorer/run/.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .schema import ScenarioError, excerpt

MAX_PHASES = 256              # a run plan, not a per-step schedule
MAX_OVERRIDES = 64            # per phase
MAX_TOKENS = 1e16             # 10 quadrillion tokens: ~600x Llama 3's 15.6T


def _frozen(value: Any) -> Any:
    """A YAML value as a hashable one (lists as tuples, recursively), as the sections hold values."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return tuple((k, _frozen(v)) for k, v in value.items())
    return value


def _thawed(value: Any) -> Any:
    """Inverse of :func:`_frozen` for the values an override may hold (scalars and lists)."""
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


def read_overrides(value: Any, path: str) -> tuple[tuple[str, Any], ...]:
    """A phase's ``overrides`` mapping (dotted key -> value) as a tuple of (key, value) pairs; the
    keys themselves are checked against the scenario's fields by run_rules.rule_phase_overrides."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ScenarioError(path, f"{excerpt(value)} is not a mapping of dotted keys to values "
                                  "(e.g. {training.global_batch: 1024})")
    if len(value) > MAX_OVERRIDES:
        raise ScenarioError(path, f"{len(value)} overrides is more than {MAX_OVERRIDES}")
    for key in value:
        if not isinstance(key, str):
            raise ScenarioError(path, f"key {excerpt(key)} is not a dotted key such as training.global_batch")
    return tuple((k, _frozen(v)) for k, v in value.items())


def write_overrides(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The (key, value) pairs back as the mapping a file holds."""
    return {k: _thawed(v) for k, v in pairs}


@dataclass(frozen=True)
class Phase:
    """One phase of the run: the scenario with ``overrides``, for ``tokens`` or ``steps``."""

    name: str = field(default="", metadata={"required": True, "max_len": 200, "doc": "phase name"})
    tokens: float | None = field(default=None, metadata={
        "min": 1, "max": MAX_TOKENS, "doc": "tokens trained in this phase (or give steps)"})
    steps: int | None = field(default=None, metadata={
        "min": 1, "max": 10**12, "doc": "iterations of this phase (or give tokens)"})
    overrides: tuple[tuple[str, Any], ...] = field(default=(), metadata={
        "convert": read_overrides, "dump": write_overrides,
        "doc": "dotted key -> value, as --set: what this phase changes"})

    def override_map(self) -> dict[str, Any]:
        """The overrides as a mapping of dotted keys to plain (YAML) values."""
        return write_overrides(self.overrides)


PHASES_FIELD: Any = field(default=(), metadata={
    "max_items": MAX_PHASES,
    "valid": "list of {name, tokens \\| steps, overrides: {dotted.key: value}}",
    "doc": "the run as ordered phases (batch ramp, context extension, growth): each the scenario with "
           "its overrides for its tokens or steps; the run's days, GPU-hours and energy are their sum "
           "(explorer/run)"})

TOTAL_TOKENS_FIELD: Any = field(default=None, metadata={
    "min": 1, "max": MAX_TOKENS,
    "doc": "tokens of a single-phase run of this scenario (run --json's run_total); or give phases"})


@dataclass(frozen=True)
class Reliability:
    """Failures, checkpoints and restarts (Young 1974; Daly 2006), PUE and price of the whole run."""

    mtbf_gpu_hours: float | None = field(default=None, metadata={
        "min": 1, "max": 1e12, "why": "GPU-hours between failures of one GPU; Llama 3: ~50,700 (419 "
                                      "unexpected interruptions in 54 days on 16,384 GPUs)",
        "doc": "mean time between job-stopping failures per GPU, GPU-hours (the job's MTBF is this / GPUs); "
               "unset = failures not modelled"})
    checkpoint_write_GBps: float = field(default=2000.0, metadata={
        "min": 0.001, "max": 1e7, "why": "aggregate storage bandwidth; Llama 3's Tectonic sustains 2 TB/s",
        "doc": "aggregate bandwidth at which the job writes a checkpoint to storage, GB/s (default: "
               "Llama 3's Tectonic, 2 TB/s sustained, Sec. 3.3.1)"})
    checkpoint_read_GBps: float | None = field(default=None, metadata={
        "min": 0.001, "max": 1e7, "doc": "aggregate bandwidth at which a restart reads it, GB/s; default "
                                         "the write bandwidth"})
    restart_s: float = field(default=0.0, metadata={
        "min": 0, "max": 1e6, "why": "seconds to reschedule and re-initialise a job after a failure",
        "doc": "fixed time of a restart besides reading the checkpoint (reschedule, NCCL init), s"})
    async_checkpoint: bool = field(default=False, metadata={
        "doc": "write checkpoints in the background: only the copy of each GPU's state to host memory "
               "stalls training (PyTorch DCP async_save)"})
    checkpoint_interval_s: float | None = field(default=None, metadata={
        "min": 1, "max": 1e8, "doc": "seconds between checkpoints; default Young/Daly's optimum "
                                     "sqrt(2 x write cost x job MTBF)"})
    repair_h: float = field(default=0.0, metadata={
        "min": 0, "max": 1e5, "why": "hours until a failed node is back in the job",
        "doc": "hours until a failed node is replaced or repaired; 0 = a spare takes its place at once "
               "(the restart alone). Without `elastic` the job waits while any node is under repair; "
               "other nodes fail meanwhile (the nodes down are Poisson with mean repair time / job MTBF)"})
    elastic: bool = field(default=False, metadata={
        "doc": "after a failure, continue on the surviving nodes (the data-parallel replicas on the failed "
               "node dropped, as cluster.faults does) until the node is back (repair_h), then restart once "
               "more to rejoin it (TorchElastic-style), instead of waiting for it"})
    pue: float = field(default=1.1, metadata={
        "min": 1, "max": 5, "why": "facility power over IT power; 1.0 is the ideal",
        "doc": "power usage effectiveness of the datacenter (default 1.1, Google's fleet; the Uptime "
               "Institute 2021 survey's average is 1.57)"})
    price_per_gpu_hour: float | None = field(default=None, metadata={
        "min": 0, "max": 1e6, "doc": "price of one GPU-hour, for the run's cost; unset = no price"})
