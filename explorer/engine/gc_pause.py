"""Pausing Python's cyclic garbage collector while a large object graph is being built.

A simulation (or the unfolding of a folded timeline) allocates tens of thousands of tasks that all
stay alive until it returns, so every collection the allocations trigger finds nothing to free yet
traverses every young object — on the 1T-parameter row of bench/korthikanti.py that was ~40% of a
simulation and half of unfolding its timeline.  Reference counting still frees acyclic garbage at
once; cycles left behind are collected after the pause as usual.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    """Disable the cyclic collector for the ``with`` block, restoring its former state after (so
    nested pauses and callers that disabled it themselves keep theirs)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
