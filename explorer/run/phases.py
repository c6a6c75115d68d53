"""Each phase of the run as a scenario: the base scenario with the phase's overrides applied the way
``--set`` applies them (explorer/config/overrides.py), loaded and checked like any file, and its
length in iterations."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from ..config.loading import to_dict
from ..config.run_plan import Phase
from ..config.schema import ScenarioError
from ..scenario import Scenario, apply_overrides, from_dict
from ..variants.faults import surviving_scenario

# Defaults the loader derives from other fields (config/loading.py's table): left out of the base a
# phase starts from when they are the derived values, so that a phase that changes the GPUs, the
# fabric or the degrees derives its own (a phase on roce-100 kept ib-ndr's 400 Gb/s and 0.94, one on
# b200 kept the H100's 450 GB/s NVLink).
_REDERIVED = (("parallelism", "dp"), ("communication", "bucket_MB"), ("communication", "comm_sms"),
              ("cluster", "scale_up", "bandwidth_GBps"), ("cluster", "scale_up", "domain_gpus"),
              ("cluster", "scale_out", "nic_Gbps"), ("cluster", "scale_out", "latency_us"),
              ("cluster", "scale_out", "efficiency"))


@dataclass(frozen=True)
class PhasePlan:
    """One phase: its name, its scenario, the tokens one iteration trains and its iterations."""

    name: str
    scenario: Scenario
    tokens_per_iteration: float
    iterations: int
    key: str                      # the effective scenario as text: phases with one key simulate once

    @property
    def tokens(self) -> float:
        return self.tokens_per_iteration * self.iterations


def tokens_per_iteration(sc: Scenario) -> float:
    """Tokens one iteration trains: global batch x sequence length (sequences of seq_len tokens) —
    the batch the survivors of failed nodes run where it shrinks (variants/faults.py: the steps
    were counted for the whole batch while timed for the smaller one, and failures shortened the
    run)."""
    batch = sc.training.global_batch
    if sc.cluster.faults.failed_nodes:
        batch = surviving_scenario(sc)[0].training.global_batch
    return float(batch * sc.model.seq_len)


def iterations_for(tokens: float, per_iteration: float) -> int:
    """Whole iterations to train ``tokens``: tokens / (global_batch x seq_len), rounded up (a run stops
    after a whole step)."""
    return max(int(math.ceil(tokens / per_iteration - 1e-9)), 1)


def has_run(sc: Scenario) -> bool:
    """Whether the scenario describes a whole run (phases or total_tokens)."""
    return bool(sc.training.phases) or sc.training.total_tokens is not None


def base_mapping(sc: Scenario) -> dict[str, Any]:
    """The scenario as a raw mapping without its run plan, its loader-derived defaults left out where
    they are the derived values (so a phase re-derives them for its own degrees)."""
    raw = to_dict(sc)
    raw["training"].pop("phases", None)
    raw["training"].pop("total_tokens", None)
    lean = copy.deepcopy(raw)
    for path in _REDERIVED:
        _parent(lean, path).pop(path[-1], None)
    try:
        again = from_dict(lean)
    except ScenarioError:
        return raw
    # Each default left out only where the loader derives the value the scenario has.
    for path in _REDERIVED:
        if _value(again, path) != _value(sc, path) and path[-1] in _parent(raw, path):
            _parent(lean, path)[path[-1]] = _parent(raw, path)[path[-1]]
    return lean


def _parent(mapping: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The mapping holding ``path``'s last key (empty sections made as needed)."""
    node = mapping
    for part in path[:-1]:
        node = node.setdefault(part, {})
    return node


def _value(sc: Scenario, path: tuple[str, ...]) -> Any:
    node: Any = sc
    for part in path:
        node = getattr(node, part)
    return node


def _relabel(exc: ScenarioError, i: int, ph: Phase) -> ScenarioError:
    """The error of phase ``i``'s scenario, naming the override that caused it where it is one."""
    keys = [k for k, _ in ph.overrides]
    message = str(exc)[len(exc.field) + 2:] if exc.field else str(exc)
    if exc.field in keys:
        return ScenarioError(f"training.phases[{i}].overrides.{exc.field}", message)
    return ScenarioError(f"training.phases[{i}]", f"phase {ph.name!r}: {exc}")


def plan(sc: Scenario) -> tuple[PhasePlan, ...]:
    """The run's phases in order (one phase of the scenario itself for ``total_tokens``); empty when
    the scenario has no run plan.  Raises a ScenarioError naming the phase's field when a phase's
    scenario is invalid."""
    t = sc.training
    if not has_run(sc):
        return ()
    if not t.phases:
        assert t.total_tokens is not None
        per = tokens_per_iteration(sc)
        return (PhasePlan("run", sc, per, iterations_for(t.total_tokens, per), "base"),)
    base = base_mapping(sc)
    out = []
    for i, ph in enumerate(t.phases):
        overrides = ph.override_map()
        try:
            phase_sc = from_dict(apply_overrides(base, overrides)) if overrides else _without_plan(sc)
        except ScenarioError as exc:
            raise _relabel(exc, i, ph) from None
        per = tokens_per_iteration(phase_sc)
        n = ph.steps if ph.steps is not None else iterations_for(ph.tokens or 0.0, per)
        key = repr(sorted(overrides.items()))
        out.append(PhasePlan(ph.name, phase_sc, per, n, key))
    return tuple(out)


def _without_plan(sc: Scenario) -> Scenario:
    """``sc`` itself as a phase without overrides (its run plan plays no part in one iteration)."""
    return sc
