"""A layout a search priced exactly (:class:`Candidate`), and the one sentence a search says of the
scenario's own layout beside the best (SearchResult.verdict): it is the fastest that fits with the
headroom, or the best found is this much faster, or it does not fit, or (its own layout short of
the headroom) the fastest found with the headroom is this much slower."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..analysis.compare import step_seconds
from ..analysis.verdict import MemoryVerdict
from .space import Layout


@dataclass(frozen=True)
class Candidate:
    """A layout simulated with the full engine."""

    layout: Layout
    dp: int
    figures: Mapping[str, Any]        # Scores.row() priced exactly: time, mfu, memory, fits, breakdown
    estimate_s: float | None          # the ranking's iteration time (None for the baseline)
    link: str | None
    baseline: bool = False
    capacity_GB: float = math.inf     # the GPU's memory (GB = 1e9 B): on a mixed cluster the tightest's
    order: str = ""                   # the rank placement it ran (the scenario's own unless the layout's)
    need_GB: float | None = None      # mixed cluster: its tightest GPU's memory (else the busiest's)
    # Every field that differs from the scenario searched (its --set included): the layout's, and
    # what it implies (a cleared layer split, the nodes of --gpus, a derived bucket or SM share).
    changed: Mapping[str, Any] | None = None

    @property
    def iteration_time_s(self) -> float:
        return self.figures["iteration_time_s"]

    @property
    def step_s(self) -> float:
        """What a ranking compares: the time per step — the iteration, or the amortised step of
        replicas that synchronise every few steps (a hunt found streaming DiLoCo's layouts ranked by
        their inner step: a chimera layout 'at 1.625 s' whose step is 2.018 s ranked third)."""
        return step_seconds(self.figures)

    @property
    def memory(self) -> MemoryVerdict:
        """The layout's memory verdict (explorer/analysis/verdict.py)."""
        need = self.figures["memory_GB_total"] if self.need_GB is None else self.need_GB
        return MemoryVerdict(need, self.capacity_GB, bool(self.figures["fits"]))

    def to_json(self) -> dict[str, Any]:
        """The ``search --json`` object.  Its ``overrides`` are the layout's fields, every other field
        that differs from the scenario searched (a cleared layer split, --gpus's nodes), and the
        data-parallel degree: applied to the scenario file with ``run --set`` they rerun the row (a
        file that sets ``parallelism.dp`` would otherwise keep its own degree)."""
        # Every layout field, and what else differs from the scenario searched.
        return {"overrides": {**(self.changed or {}), **self.layout.overrides(), "parallelism.dp": self.dp},
                **self.figures,
                "estimate_s": self.estimate_s,
                "memory_capacity_GB": self.capacity_GB, "free_GB": self.memory.free_GB,
                "link": self.link, "baseline": self.baseline,
                "layout": {"tp": self.layout.tp, "pp": self.layout.pp, "dp": self.dp, "cp": self.layout.cp,
                           "ep": self.layout.ep, "vpp": self.layout.vpp, "schedule": self.layout.schedule,
                           "zero": self.layout.zero, "micro_batch": self.layout.micro_batch,
                           "recompute": self.layout.recompute,
                           "sequence_parallel": self.layout.sequence_parallel,
                           "order": self.order or self.layout.order or None,
                           "pipeline_layout": list(self.layout.pipeline_layout) or None,
                           **({"family": dict(self.layout.extra)} if self.layout.extra else {})}}


def verdict_of(b: Candidate | None, best: Candidate | None, headroom_GB: float) -> str:
    """What a search means for the scenario's own layout ``b`` beside the best ranked ``best`` (both
    priced exactly), in one sentence: it is the fastest that fits with ``headroom_GB``, or the best
    found is this much faster, or it does not fit, or the fastest with the headroom is slower."""
    if b is None:
        return "the scenario's own layout is not valid at this size"
    if not b.memory.fits:
        then = (f"the best found fits with {best.memory.free_GB:.1f} GB free" if best
                else "nothing found fits")
        return (f"the scenario's own layout needs {b.memory.need_GB:.1f} of {b.memory.capacity_GB:.1f} "
                f"GB per GPU: it does not fit; {then}")
    if best is None or best.baseline:
        if not b.memory.roomy(headroom_GB):
            # (a hunt found "the fastest found" said of a layout itself short of the headroom)
            return (f"nothing fits with {headroom_GB:g} GB to spare; the scenario's own layout, "
                    f"shown, leaves only {b.memory.free_GB:.1f} GB free")
        return (f"nothing faster fits with {headroom_GB:g} GB to spare: the scenario's own layout "
                "is the fastest found")
    gain = 1 - best.step_s / b.step_s
    if gain < 0:          # only a layout short of the headroom (the user's own) is faster
        slower = best.step_s / b.step_s
        return (f"the scenario's own layout is faster but leaves only {b.memory.free_GB:.1f} GB free, "
                f"under the {headroom_GB:g} GB headroom; the fastest found with it is {slower:.2f}x "
                f"slower, with {best.memory.free_GB:.1f} GB free")
    tight = ("" if b.memory.roomy(headroom_GB) else f"; yours leaves only {b.memory.free_GB:.1f} GB "
             f"free, under the {headroom_GB:g} GB headroom")
    return (f"best found is {b.step_s / best.step_s:.2f}x faster than the scenario's "
            f"own layout ({gain:.1%} less time) with {best.memory.free_GB:.1f} GB free{tight}")
