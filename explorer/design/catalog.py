"""What a narrowed layout space holds, counted without enumerating it again.

The app's search planner (explorer/ui/views/design_search.py) tries one narrowing after another —
sequence parallelism always on, the scenario's ZeRO stage, fewer micro-batch sizes, ... — and
needs each trial's size: its layouts, those the estimator prices, their distinct compiled shapes
and the latency-timed layouts the search would simulate.  Enumerating DeepSeek-V3's 338,640
layouts once per trial took 3 s of a 5 s budget.  A :class:`Catalog` enumerates a space that
holds every trial once, as arrays, and counts any narrower :class:`~explorer.design.space.Space`
with masks: a layout of the wide space is in a narrower one exactly when each of its choices is
(``enumerate_layouts``' rules: one pipeline stage always runs 1F1B at vpp 1; sequence
parallelism exists only with tensor parallelism).  tests/test_design_catalog.py checks the counts
against enumeration.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..scenario import Scenario
from ..schedules import registry
from ..workloads.registry import workload_for
from .search import TIMED_PIPELINES
from .space import (
    VPP_CHOICES,
    Layout,
    Space,
    enumerate_layouts,
    is_timed,
    micro_batch_limit,
    synchronous_schedules,
)


@dataclass(frozen=True)
class Extent:
    """What a space holds: its layouts, those the estimator prices (all but the latency-timed ones),
    their distinct compiled shapes (:func:`shape`), and the timed layouts a search simulates (at
    most TIMED_PIPELINES per timed schedule)."""

    layouts: int
    priced: int
    shapes: int
    timed_runs: int


def shape(lay: Layout, gpus: int, batch: int) -> tuple[str, int, int, int]:
    """What the estimator compiles once per layout shape: schedule, pp, vpp, micro-batches per
    pipeline (batch / (dp · micro-batch))."""
    return lay.schedule, lay.pp, lay.vpp, batch * lay.tp * lay.pp * lay.cp // (gpus * lay.micro_batch)


class Catalog:
    """Every layout of ``sc`` in the widest space a planner narrows from (the default space plus
    ``schedules`` and ``vpps``, e.g. the scenario's own), as arrays."""

    def __init__(self, sc: Scenario, schedules: Iterable[str] = (), vpps: Iterable[int] = ()) -> None:
        self._sc = sc
        wan = sc.cluster.datacenters > 1
        self.default_schedules = synchronous_schedules(wan=wan)
        names = tuple(dict.fromkeys((*self.default_schedules, *schedules)))
        wide = Space(schedules=names, vpp=tuple(sorted({*VPP_CHOICES, *(v for v in vpps if v > 1)})))
        lays = list(enumerate_layouts(sc, wide))
        # A whole-batch family's micro-batches are accumulation steps of its batch, whatever
        # Space.max_micro_batch says (space.enumerate_layouts).
        self._whole_batch = workload_for(sc.model).whole_batch
        gpus, batch = sc.cluster.gpus, sc.training.global_batch
        self._sched_names = sorted({lay.schedule for lay in lays})
        sched = {n: i for i, n in enumerate(self._sched_names)}
        self._rc_names = sorted({lay.recompute for lay in lays})
        self._rc = {n: i for i, n in enumerate(self._rc_names)}
        # A family's own fields (Layout.extra: a DLRM's sharding plans), each distinct set once.
        self._extras = list(dict.fromkeys(lay.extra for lay in lays))
        extra = {e: i for i, e in enumerate(self._extras)}
        self._extra = np.array([extra[lay.extra] for lay in lays], dtype=np.int64)
        cols = np.array([(lay.tp, lay.pp, lay.cp, lay.ep, lay.vpp, sched[lay.schedule], lay.zero,
                          lay.micro_batch, self._rc[lay.recompute], lay.sequence_parallel) for lay in lays],
                        dtype=np.int64).reshape(len(lays), 10)
        (self.tp, self.pp, self.cp, self.ep, self.vpp, self.sched, self.zero, self.mb, self.rc,
         self.sp) = cols.T
        self.timed = np.array([is_timed(n) for n in self._sched_names], dtype=bool)[self.sched] \
            if lays else np.zeros(0, dtype=bool)
        keys = [shape(lay, gpus, batch) for lay in lays]
        index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        self.shape = np.array([index[k] for k in keys], dtype=np.int64)
        self.virtual = np.array([registry.get(n).virtual_stages for n in self._sched_names],
                                dtype=bool)[self.sched] if lays else np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.tp)

    def layout(self, i: int) -> Layout:
        """The ``i``-th catalogued layout (enumeration order)."""
        return Layout(int(self.tp[i]), int(self.pp[i]), int(self.cp[i]), int(self.ep[i]), int(self.vpp[i]),
                      self._sched_names[self.sched[i]], int(self.zero[i]), int(self.mb[i]),
                      self._rc_names[self.rc[i]], bool(self.sp[i]), extra=self._extras[self._extra[i]])

    def mask(self, space: Space) -> np.ndarray:
        """Which catalogued layouts ``enumerate_layouts(sc, space)`` yields."""
        names = space.schedules or self.default_schedules
        ok_sched = np.isin(self.sched, [i for i, n in enumerate(self._sched_names) if n in names])
        ok_vpp = ~self.virtual | np.isin(self.vpp, [v for v in space.vpp if v > 1])
        pipeline = (self.pp == 1) | (ok_sched & ok_vpp)
        sp = [int(s) for s in space.sequence_parallel] or [0]
        ok_sp = (self.tp == 1) | np.isin(self.sp, sp)
        ok_rc = np.isin(self.rc, [self._rc[r] for r in space.recompute if r in self._rc])
        return (pipeline & ok_sp & ok_rc & np.isin(self.zero, list(space.zero))
                & ((self.mb <= micro_batch_limit(self._sc, space)) | self._whole_batch))

    def extent(self, space: Space) -> Extent:
        """The :class:`Extent` of ``space`` (a narrowing of the catalogued one)."""
        m = self.mask(space)
        priced = m & ~self.timed
        timed = np.bincount(self.sched[m & self.timed], minlength=len(self._sched_names))
        return Extent(int(m.sum()), int(priced.sum()), int(np.unique(self.shape[priced]).size),
                      int(np.minimum(timed, TIMED_PIPELINES).sum()))


def enumerated_extent(sc: Scenario, space: Space) -> Extent:
    """The :class:`Extent` of ``space`` by enumerating it (what :meth:`Catalog.extent` must equal)."""
    gpus, batch = sc.cluster.gpus, sc.training.global_batch
    n, priced = 0, 0
    shapes: set[Any] = set()
    timed: dict[str, int] = {}
    for lay in enumerate_layouts(sc, space):
        n += 1
        if is_timed(lay.schedule):
            timed[lay.schedule] = timed.get(lay.schedule, 0) + 1
            continue
        priced += 1
        shapes.add(shape(lay, gpus, batch))
    return Extent(n, priced, len(shapes), sum(min(k, TIMED_PIPELINES) for k in timed.values()))

