"""Bytes, tier load and main calls of a full iteration without its tasks: the measures
analysis/measures.measure reads from the task list, from the transfer counts instead.

Nothing here depends on timing.  A class's network calls are its chunks' per-unit calls times the
units it runs and, per stage pair, the calls of one transfer times the transfers it sends
(utilisation.class_calls counts tasks that share a calls tuple the same way); the pipeline's main
call is its slowest transfer (report.link_summary).
"""
from __future__ import annotations

import copy

import numpy as np

from ..analysis.report import link_summary
from ..engine import Task
from ..taskgraph.builder import IterationBuilder
from ..taskgraph.records import LinkCall, TransferInfo
from ..utilisation import class_traffic, tier_utilisation


def with_units(b: IterationBuilder, m: int) -> IterationBuilder:
    """``b`` counting ``m`` pipeline units per iteration (rank_chunks, transfer calls), its program
    orders left as they are (nothing here reads them)."""
    out = copy.copy(b)
    out.m = out.m_sim = m
    out._pp_links = {}
    return out


def transfer_tasks(b: IterationBuilder, sends: np.ndarray) -> list[tuple[Task, int]]:
    """One representative transfer task per (class, pair, direction) that sends, and how many of
    them the iteration has: ``sends`` (2, p, pairs) counts forward and backward transfers."""
    out = []
    for d, direction in enumerate(("forward", "backward")):
        for s, pair in zip(*np.nonzero(sends[d]), strict=True):
            st, stream, priority, time_s, parts, links, tail = b._transfer_shape(int(pair), int(s), direction)
            t = Task(st, stream, "pp", time_s, [], priority, parts, TransferInfo(0, 0, *tail), links)
            out.append((t, int(round(sends[d, s, pair]))))
    return out


def byte_measures(b: IterationBuilder,
                  sends: np.ndarray) -> tuple[tuple[dict, ...], tuple[dict, ...], dict, dict]:
    """Per class bus bytes per dimension and bytes per tier boundary, the tiers' load (bytes over
    capacity: utilisation x T) and the main call of each dimension, for builder ``b`` (its ``m``
    the iteration's units) whose classes send ``sends`` transfers (2, p, pairs)."""
    p = b.p
    reps = transfer_tasks(b, sends)
    calls: list[list[LinkCall]] = []
    comm: list[dict[str, float]] = []
    for s in range(p):
        held = b.rank_chunks(s)
        mine = [(t, k) for t, k in reps if t.cls == s]
        own = [c.scaled(units) for ch, units in held for c in ch.link_calls]
        # Forward and backward transfers on one pair share one calls tuple (builder._pp_links).
        shared: dict[int, list] = {}
        for t, k in mine:
            entry = shared.setdefault(id(t.links), [t.links, 0])
            entry[1] += k
        calls.append(own + [c if k == 1 else c.scaled(k) for links, k in shared.values() for c in links])
        per = {"tp": sum(k * c.tp_bytes for c, k in held), "cp": sum(k * c.cp_bytes for c, k in held),
               "ep": sum(k * c.ep_bytes for c, k in held), "pp": sum(k * t.info.bytes for t, k in mine),
               "dp": sum(k * c.fsdp_bytes for c, k in held)}
        comm.append(per)
    traffic = tuple({d: tuple(v) for d, v in class_traffic(b, s, [], calls[s]).items()} for s in range(p))
    load = tier_utilisation(b, b.net, [[] for _ in range(p)], 1.0, calls)
    links = link_summary(b, [t for t, _ in reps])
    return tuple(comm), traffic, load, links
