"""A fast, vectorised estimate of many configurations, from the engine's own cost functions.

``estimate_many(scenarios)`` returns :class:`Estimates` (iteration time, breakdown, memory, fit,
MFU, tokens/s), one row per validated scenario; ``estimate(sc)`` one row; ``estimate_overrides(raw,
overrides)`` many dotted-key variants of one base, validated faster than ``from_dict`` one by one,
with per row the one-line reason it is invalid.

How (one module per concept):

==============  ==================================================================================
keys            what each cost depends on (compute key, network key), interned; the shared network
stages          a network's stages grouped per dimension by where their groups sit (priced once)
chunk_basis     a chunk's work as chunk_work's pieces (one layer of each kind, each end) x counts,
                keyed by what chunk_work reads of the groups; the builder's layer split
buckets         gradient buckets and ZeRO 1-2 gathers as dp_buckets.dp_tasks makes them
profile         one row as arrays over stages: chunks, passes' parts, transfers, buckets, optimizer
program         a schedule's program order compiled once per shape into steps of ops
critical_path   the engine's longest path over a program, every stage and row of a step at once
pipeline        pass durations (SM contention, DualPipe's fused pairs) and a group's stage times
sync            FIFO bucket tails, optimizer, gathers; the iteration window of the registry entry
priority        P3 bucket priorities replayed on a priority queue (rare option, per row)
memory          per-GPU memory as analysis/memory.class_memory, the peak replayed as live counts
breakdown       the busiest stage's seconds per category
many            estimate_many: grouping, assembly, throughput and MFU
fast            estimate_many(..., exact=False): long rows at two short unit counts, extrapolated
overrides       estimate_overrides: the fast validation of many overrides of one base
result          the Estimates record
==============  ==================================================================================

Agreement: equal to ``explorer.simulate.simulate`` to float rounding (iteration time, memory,
fit) on every shipped scenario and on random valid scenarios (tests/test_estimator.py); with
``exact=False`` (what search ranks with) within fast.STATED_BOUND, layout rankings kept.
"""
from __future__ import annotations

from importlib import import_module

__all__ = ["Estimates", "estimate", "estimate_many", "estimate_overrides", "scenarios_from_overrides"]
# Where each name lives, imported on first use (PEP 562): the simulation imports a few of these
# modules (program, chunk_basis, keys) and should not pay for the vectorised estimator's others.
_HOME = {"Estimates": ".result", "estimate": ".many", "estimate_many": ".fast",
         "estimate_overrides": ".overrides", "scenarios_from_overrides": ".overrides"}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(_HOME[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
