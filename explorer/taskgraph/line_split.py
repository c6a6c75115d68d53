"""The fitting split of a pipeline whose stages hold one chunk each (1F1B, GPipe, ZB-H1/H2, 2BW),
exactly: the least largest chunk seconds among splits whose every chunk fits its GPU's memory.

A chunk's seconds and bytes both grow with its layers (prefix sums over the layers), so for a cap
on a chunk's seconds the chunks taking, in order, as many layers as both caps allow fit whenever
any split does — the greedy of partition._Line, with the bytes as a second cap (ParDNN's and
PipeDream's objective, the slowest stage subject to memory: memory_split.py's module docstring).
The least feasible cap on the seconds is found by bisection, 32 caps at a time, to 1e-9 relative.
"""
from __future__ import annotations

import numpy as np

_TOL = 1e-9        # memory_split._TOL: summation noise never decides


def fitting_line(prefix: np.ndarray, edge: np.ndarray, flight: np.ndarray, least: np.ndarray,
                 cap: float) -> np.ndarray | None:
    """Chunk bounds (0 .. layers) of the split of least largest chunk seconds whose every chunk
    fits ``cap`` bytes, or None when none does.

    ``prefix`` (layers + 1, 3): prefix sums of the layers' seconds, state bytes and activation
    bytes per unit; ``edge`` (3, chunks): each chunk's edge seconds, state and activation bytes;
    ``flight`` (chunks,): units in flight at each stage's peak; ``least`` (chunks,): the fewest
    layers each chunk may hold."""
    k = edge.shape[1]
    sec, state, act = prefix[:, 0], prefix[:, 1], prefix[:, 2]
    # Per chunk the bytes' running sum it is capped on (state + flight x activations: grows with
    # the layers) and the room its edge work leaves.
    mem = state[None, :] + flight[:, None] * act[None, :]
    room_b = cap - edge[1] - flight * edge[2]
    per = np.diff(sec)
    lo = max(float(per.max()), float(sec[-1] + edge[0].sum()) / k) * (1 - 1e-12)
    hi = float(sec[-1] + edge[0].max()) * (1 + 1e-9)
    if not _greedy(np.array([hi]), sec, mem, room_b, edge, least)[1][0]:
        return None                                 # no split fits, whatever its seconds
    for _ in range(8):                              # 32 caps a round: the bracket / 31 each time
        caps = np.linspace(lo, hi, 32)
        _, ok = _greedy(caps, sec, mem, room_b, edge, least)
        first = int(np.argmax(ok)) if ok.any() else len(caps) - 1
        lo, hi = (caps[first - 1] if first else lo), caps[first]
        if hi - lo <= hi * _TOL:
            break
    bounds, ok = _greedy(np.array([hi]), sec, mem, room_b, edge, least)
    return bounds[0] if ok[0] else None


def _greedy(caps: np.ndarray, sec: np.ndarray, mem: np.ndarray, room_b: np.ndarray, edge: np.ndarray,
            least: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cap on a chunk's seconds: the bounds of the chunks taking, in order, as many layers as
    the cap and their stage's bytes allow (at least their least, one left for each later chunk),
    and whether the last chunk, which takes the rest, fits both too."""
    k, n = edge.shape[1], len(sec) - 1
    i = np.zeros(len(caps), dtype=np.int64)
    ok = np.ones(len(caps), dtype=bool)
    out = [i]
    tol = caps * (1 + _TOL)
    edge_s, room, fewest = edge[0].tolist(), room_b.tolist(), least.tolist()
    for j in range(k - 1):
        # The last layer each cap lets the chunk end at: one less than the first insertion point
        # past its seconds and past its bytes (the lesser of the two), and one left for each later chunk.
        e = np.minimum(np.searchsorted(sec, sec[i] + tol - edge_s[j], "right"),
                       np.searchsorted(mem[j], mem[j, i] + room[j], "right")) - 1
        e = np.minimum(e, n - (k - j - 1))
        at_least = i + fewest[j]
        ok &= e >= at_least
        i = np.maximum(e, at_least)
        out.append(i)
    out.append(np.full(len(caps), n))
    ok &= sec[n] - sec[i] + edge[0, -1] <= tol
    ok &= mem[-1, n] - mem[-1, i] <= room_b[-1]
    return np.stack(out, axis=1), ok
