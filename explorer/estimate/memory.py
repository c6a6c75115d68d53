"""Per-GPU memory of every stage of many rows, as analysis/memory.class_memory computes it.

Parameters, gradients and optimizer state of the chunks a stage holds, sharded over the
data-parallel group as the ZeRO stage says (Rajbhandari et al., ZeRO, SC20, Fig. 1), times the
weight versions the schedule stashes (PipeDream); under ZeRO-3 the gathered working set; and
activations at the peak of the stage's program order plus one recomputed layer's working set
(explorer/activations.py).  The peak replays the order once per shape as *counts* of each chunk's
activations alive (:func:`live_counts`), so that a row's peak is a maximum of dot products with its
own per-chunk bytes — the same replay as the registry's peak_activations (schedules/pipeline.py,
schedules/dualpipe.py), whose result it equals for any bytes.
"""
from __future__ import annotations

import numpy as np

from ..activations import recompute_working_bytes
from ..schedules.registry import Schedule
from ..taskgraph.techniques.optimizer import GRAD_BYTES, OPTIMIZER_STATE_BYTES, PARAM_BYTES
from .chunk_basis import F_IDX
from .keys import memo_table
from .profile import RowProfile

_TRANSIENT = memo_table()
_TOTALS = memo_table()
_LIVE: dict[tuple, np.ndarray] = {}


def live_counts(schedule: Schedule, p: int, units: int, v: int) -> np.ndarray:
    """(p, K, nch) per stage the distinct vectors of per-chunk activations alive after each op of
    its order (padded with zeros), memoised per shape."""
    key = (schedule.name, p, units, v)
    got = _LIVE.get(key)
    if got is None:
        per = [_stage_counts(schedule, p, units, v, s) for s in range(p)]
        k = max(len(x) for x in per)
        got = np.zeros((p, k, schedule.chunks_per_rank(v)))
        for s, x in enumerate(per):
            got[s, :len(x)] = x
        if len(_LIVE) > 4096:
            _LIVE.clear()
        _LIVE[key] = got
    return got


def _stage_counts(schedule: Schedule, p: int, units: int, v: int, stage: int) -> np.ndarray:
    """The distinct vectors of per-chunk activations alive after each op of the stage's order
    (peak_activations' replay with one unit of bytes per chunk, counted per chunk)."""
    order = schedule.order(stage, p, units, v)
    nch = schedule.chunks_per_rank(v)
    live = np.zeros(nch)
    seen = [live.copy()]
    if schedule.two_directions:
        # dualpipe.peak_activations: a fused F&B adds the forward's chunk, peaks, frees the backward's.
        for op in order:
            if op[0] == "FB":
                live[op[1][0]] += 1
                seen.append(live.copy())
                live[op[2][0]] -= 1
            elif op[0] == "F":
                live[op[1]] += 1
            elif op[0] in ("B", "W"):
                live[op[1]] -= 1
            seen.append(live.copy())
    else:
        # pipeline.peak_activations: forwards add, the pass completing the gradients frees.
        release = "W" if any(kind == "W" for kind, _, _ in order) else "B"
        for kind, _, c in order:
            if kind == "F":
                live[c] += 1
            elif kind == release:
                live[c] -= 1
            seen.append(live.copy())
    return np.unique(np.array(seen), axis=0)


def _transient(prof: RowProfile) -> tuple[float, float]:
    """Bytes one recomputed dense / MoE layer holds again in its backward (memory.recompute_transient)."""
    got = _TRANSIENT.get(prof.ckey)
    if got is None:
        sc = prof.sc
        tokens = sc.training.micro_batch * sc.model.seq_len / sc.parallelism.cp / sc.parallelism.token_slices
        got = _TRANSIENT[prof.ckey] = (recompute_working_bytes(sc, False, tokens),
                                       recompute_working_bytes(sc, True, tokens) if sc.model.is_moe else 0.0)
    return got


def memory_total(prof: RowProfile) -> float:
    """Bytes per GPU of the busiest stage (max over stages of the total), memoised on what it
    reads (RowProfile.memory_key: no network, so a sweep over bandwidths prices it once)."""
    got = _TOTALS.get(prof.memory_key)
    if got is None:
        got = _TOTALS[prof.memory_key] = float(stage_memory(prof).sum(axis=1).max())
    return got


def stage_memory(prof: RowProfile) -> np.ndarray:
    """(p, 4) bytes per GPU of each stage: parameters, gradients, optimizer state, activations
    (analysis/memory.class_memory)."""
    sc, p = prof.sc, prof.p
    zero = sc.parallelism.zero
    held = prof.holds
    dense = prof.layout.params.sum(axis=1)
    expert = prof.layout.expert.sum(axis=1)
    nd = prof.dp_groups[:, 0]
    ne = np.where(expert > 0, prof.dp_groups[:, 1], 1)

    def shard(sharded: bool) -> np.ndarray:
        return dense / nd + expert / ne if sharded else dense + expert

    versions = np.array([prof.schedule.weight_versions(s, p) for s in range(p)])
    params = PARAM_BYTES * shard(zero >= 3) * versions
    grads = GRAD_BYTES * shard(zero >= 2)
    if zero >= 3:
        # ZeRO-3 working set: the gathered layer, prefetch_layers more, one layer's full gradients.
        layer = prof.layer_bytes[held].max(axis=1)
        params = params + layer * (1 + sc.communication.prefetch_layers)
        grads = grads + layer / PARAM_BYTES * GRAD_BYTES
    opt = OPTIMIZER_STATE_BYTES[sc.training.optimizer] * shard(zero >= 1)
    counts = prof.counts[held]                                           # (p, nch, ROLES)
    dense_t, moe_t = _transient(prof)
    transient = np.maximum(np.where(counts[..., 0].sum(-1) > 0, dense_t, 0.0),
                           np.where(counts[..., 1].sum(-1) > 0, moe_t, 0.0))
    act = prof.feat[held, F_IDX["act_bytes"]]                            # (p, nch)
    peak = np.einsum("skc,sc->sk", live_counts(prof.schedule, p, prof.units, prof.v), act).max(axis=1)
    return np.stack([params, grads, opt, peak + transient], axis=-1)
