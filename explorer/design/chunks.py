"""How much work goes in one chunk, and when work is small enough to stay in this process.

Chunk boundaries depend on the work alone (the engine, and whether the vectorised estimator is
installed), never on the executor, so a local pool and a Dask cluster compute exactly the same
chunks and return identical numbers (explorer/design/executors.py).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
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


def grouped(keys: Sequence[tuple[Hashable, Hashable]], size: int) -> list[list[int]]:
    """Positions of ``keys`` in chunks of about ``size`` that keep equal groups together: each key
    is (group, rank); positions sorted by key (stable), each group's run cut into the fewest
    pieces of at most ``size`` (in rank order), runs shorter than that packed into one chunk while
    it holds at most ``size``.

    Why: a worker keeps what it has priced (memo tables, compiled programs) for the chunks it runs
    next, and two workers given chunks of one group would each price it.  A group that names what a
    chunk's costliest pieces are memoised on (a schedule's program for one unit count) is then
    priced by one worker, mostly once; the rank keeps what smaller pieces are memoised on (a layer
    split) together inside a group cut into pieces."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    runs: list[list[int]] = []
    for i in order:
        if runs and keys[runs[-1][0]][0] == keys[i][0]:
            runs[-1].append(i)
        else:
            runs.append([i])
    out: list[list[int]] = []
    for run in runs:
        pieces = -(-len(run) // size)
        step = -(-len(run) // pieces)
        for k in range(0, len(run), step):
            part = run[k:k + step]
            if out and len(part) < size and len(out[-1]) + len(part) <= size:
                out[-1].extend(part)
            else:
                out.append(part)
    return out
