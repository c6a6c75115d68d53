"""How much work goes in one chunk, and when work is small enough to stay in this process.

Chunk boundaries depend on the work alone (the engine, and whether the vectorised estimator is
installed), never on the executor, so a local pool and a Dask cluster compute exactly the same
chunks and return identical numbers (explorer/design/executors.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from .scores import estimator_available

T = TypeVar("T")

# Seconds one configuration costs, measured on the 2-core reference machine: validating a scenario
# (from_dict, about 0.7 ms) plus the estimator's share of a vectorised batch; the full engine
# simulates in 3-80 ms (shipped scenarios), 30 ms taken as typical.
SECONDS_PER_CONFIG = {"estimate": 1e-3, "full": 3e-2}
CHUNK_SECONDS = 0.25            # long enough to amortise shipping a chunk, short for a smooth bar
# Below this much work a pool buys little: forking two workers costs about 10 ms, but a threaded host
# starts them from a forkserver (explorer/design/executors.py: imports, about 0.3 s), and workers
# do not keep the memoised cost pieces they compute.
IN_PROCESS_SECONDS = 0.25


def seconds_per_config(engine: str) -> float:
    """Expected seconds per configuration on ``engine`` ("estimate" falls back to the full engine's
    cost while the estimator is not installed)."""
    if engine == "estimate" and not estimator_available():
        engine = "full"
    return SECONDS_PER_CONFIG[engine]


def chunk_size(engine: str) -> int:
    """Configurations per chunk: about CHUNK_SECONDS of work."""
    return max(1, int(CHUNK_SECONDS / seconds_per_config(engine)))


def in_process(n: int, engine: str) -> bool:
    """Whether ``n`` configurations are little enough work (under IN_PROCESS_SECONDS) to run here."""
    return n * seconds_per_config(engine) < IN_PROCESS_SECONDS


def split(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into consecutive lists of ``size`` (the last may be shorter)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]
