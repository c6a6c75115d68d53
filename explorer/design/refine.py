"""The refinement phase of a search: rank placements and layer splits of the best layouts.

A search scores the uniform space first (degrees, schedule, ZeRO, micro-batch, recompute: every
layout at the scenario's own placement and the simulator's balanced layer split).  With
``Space.orders`` / ``Space.splits`` on, the ``Space.refine`` fastest valid layouts by that
estimate, and the ``Space.refine`` fastest that fit with the headroom, are expanded into every
variant of explorer/design/placements.py — each distinct placement x each candidate layer split
(Pipette, Yim et al. 2024, Sec. 4, refines placement and split on the configurations its
estimator ranks best in the same way, rather than over the whole product) — and the variants are
scored by the same estimator with the same memory verdict, then ranked with the rest (search.py
steps 3-4: the top K priced exactly).

Why only the best: a placement changes which tier each group's traffic crosses and a split moves
layers between stages; both act on a layout's communication and balance, not on its degrees, so a
layout far down the uniform ranking is not expected to overtake the best (every variant of the
best is scored; ``refine`` as large as the space scores all of them).  Latency-timed layouts are
not refined (each one is a full simulation).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..scenario import ScenarioError
from .placements import distinct_orders, layer_splits
from .space import Layout, LayoutBuilder, Space, is_timed

SAME = 1e-9          # relative: a variant this close to its layout's estimated time is no faster


def shape(lay: Layout) -> tuple:
    """What a placement and a layer split act on: the degrees, the schedule and its virtual stages
    (layouts that differ only in ZeRO stage, micro-batch, recompute or sequence parallelism share
    their candidates, so one of them stands for all)."""
    return lay.schedule, lay.tp, lay.pp, lay.cp, lay.ep, lay.vpp


def seeds(layouts: list[Layout], reasons: list[str | None], t_est: np.ndarray, roomy: np.ndarray,
          count: int) -> list[int]:
    """Indices of the fastest valid layout (by estimate; ties: enumeration order) of each of the
    ``count`` fastest shapes (:func:`shape`), and of the ``count`` fastest shapes among the layouts
    that fit with the headroom; the latency-timed ones left out."""
    ok = [i for i, (lay, why) in enumerate(zip(layouts, reasons, strict=True))
          if why is None and not np.isnan(t_est[i]) and not is_timed(lay.schedule)]
    fastest = sorted(ok, key=lambda i: (t_est[i], i))

    def best_shapes(order: list[int]) -> list[int]:
        first: dict[tuple, int] = {}
        for i in order:
            first.setdefault(shape(layouts[i]), i)
            if len(first) == count:
                break
        return list(first.values())

    return list(dict.fromkeys(best_shapes(fastest) + best_shapes([i for i in fastest if roomy[i]])))


def variants(raw: Mapping[str, Any], layouts: list[Layout], picks: list[int], space: Space
             ) -> list[tuple[Layout, int]]:
    """Every placement x layer-split variant of ``layouts[picks]`` not already in ``layouts``, with
    the index of the layout it varies (placements.py: the scenario's own placement is
    ``order=""``, the balanced split ``()``)."""
    builder = LayoutBuilder(raw)
    seen = set(layouts)
    out: list[tuple[Layout, int]] = []
    for i in picks:
        lay = layouts[i]
        try:
            sc = builder.scenario(lay)
        except ScenarioError:
            continue
        own = sc.parallelism.order
        orders = [""] + ([o for o in distinct_orders(sc) if o != own] if space.orders else [])
        splits = [(), *layer_splits(sc.model.layers, lay.pp, lay.vpp, lay.schedule)] if space.splits else [()]
        for order in orders:
            for split in splits:
                v = replace(lay, order=order, pipeline_layout=split)
                if v not in seen:
                    seen.add(v)
                    out.append((v, i))
    return out


Scorer = Callable[[list[Layout], list[int], np.ndarray, np.ndarray, np.ndarray], None]


def extend(raw: Mapping[str, Any], layouts: list[Layout], reasons: list[str | None], t_est: np.ndarray,
           fits: np.ndarray, roomy: np.ndarray, space: Space, score_into: Scorer
           ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Append the variants of the best layouts (module docstring) to ``layouts`` and ``reasons``
    (in place) and score them with ``score_into(new layouts, their slots, t_est, fits, roomy)``;
    returns (variants added, t_est, fits, roomy) extended to the new length.  A variant neither
    faster than the layout it varies nor fitting where that one does not is not ranked (``roomy``
    False): it would only repeat its layout's row (most placements price the same where the
    groups that differ carry little traffic; a split may equal the balanced one)."""
    if not (space.orders or space.splits) or space.refine < 1:
        return 0, t_est, fits, roomy
    pairs = variants(raw, layouts, seeds(layouts, reasons, t_est, roomy, space.refine), space)
    more, of = [v for v, _ in pairs], np.array([i for _, i in pairs], dtype=int)
    k, n = len(more), len(layouts)
    layouts += more
    reasons += [None] * k
    t_est = np.concatenate([t_est, np.full(k, np.nan)])
    fits = np.concatenate([fits, np.zeros(k, dtype=bool)])
    roomy = np.concatenate([roomy, np.zeros(k, dtype=bool)])
    score_into(more, list(range(n, n + k)), t_est, fits, roomy)
    if k:
        new = np.arange(n, n + k)
        gains = (t_est[new] < t_est[of] * (1 - SAME)) | ~roomy[of]
        roomy[new] &= gains
    return k, t_est, fits, roomy
