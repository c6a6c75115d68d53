"""What each pipeline stage holds, as the memory-limited split (memory_split.py) reads it: the chunk
in each of its local slots and the count vectors of in-flight units its order passes through
(schedules/live.py, the registry's own replay), and the same as padded arrays."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Live:
    """Per stage (rank) the chunk (in split order) each of its local slots holds, and the count
    vectors over those slots its order passes through (schedules/live.py)."""

    slots: tuple[tuple[int, ...], ...]
    vectors: tuple[tuple[tuple[int, ...], ...], ...]


@lru_cache(maxsize=256)
def live_arrays(live: Live) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stages, width) each stage's chunks, padded with the chunk count (a zero row in
    memory_split._Plan._stages), (stages, K, width) its count vectors, padded with zero vectors,
    and (stages, width) the mean of its own vectors."""
    k = 1 + max(max(x) for x in live.slots)
    width = max(len(x) for x in live.slots)
    groups = np.array([list(x) + [k] * (width - len(x)) for x in live.slots], dtype=np.int64)
    K = max(len(v) for v in live.vectors)
    vectors = np.zeros((len(live.slots), K, width))
    for s, vs in enumerate(live.vectors):
        for j, vec in enumerate(vs):
            vectors[s, j, :len(vec)] = vec
    mean = vectors.sum(axis=1) / np.array([len(v) for v in live.vectors], dtype=float)[:, None]
    return groups, vectors, mean
