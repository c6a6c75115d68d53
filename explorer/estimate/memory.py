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

from functools import lru_cache

import numpy as np

from ..activations import recompute_working_bytes
from ..schedules.registry import Schedule
from ..taskgraph.techniques.optimizer import GRAD_BYTES, OPTIMIZER_STATE_BYTES, PARAM_BYTES
from .chunk_basis import F_IDX
from .profile import RowProfile

_TRANSIENT: dict[tuple, tuple[float, float]] = {}


@lru_cache(maxsize=4096)
def live_counts(schedule: Schedule, p: int, units: int, v: int, stage: int) -> np.ndarray:
    """(K, nch) the distinct vectors of per-chunk activations alive after each op of the stage's
    order (peak_activations' replay with one unit of bytes per chunk and counted per chunk)."""
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
        if len(_TRANSIENT) > 20000:
            _TRANSIENT.clear()
    return got


def stage_memory(prof: RowProfile) -> np.ndarray:
    """(p, 4) bytes per GPU of each stage: parameters, gradients, optimizer state, activations."""
    sc, p = prof.sc, prof.p
    zero = sc.parallelism.zero
    held = prof.holds
    dense = prof.feat[held, F_IDX["params"]].sum(axis=1)
    expert = prof.feat[held, F_IDX["expert_params"]].sum(axis=1)
    nd = prof.dp_groups[:, 0]
    ne = np.where(expert > 0, prof.dp_groups[:, 1], 1)

    def shard(sharded: bool) -> np.ndarray:
        return dense / nd + expert / ne if sharded else dense + expert

    versions = np.array([prof.schedule.weight_versions(s, p) for s in range(p)])
    params = PARAM_BYTES * shard(zero >= 3) * versions
    grads = GRAD_BYTES * shard(zero >= 2)
    if zero >= 3:
        layer = prof.layer_bytes[held].max(axis=1)
        params = params + layer * (1 + sc.communication.prefetch_layers)
        grads = grads + layer / PARAM_BYTES * GRAD_BYTES
    opt = OPTIMIZER_STATE_BYTES[sc.training.optimizer] * shard(zero >= 1)
    act_chunk = prof.feat[held, F_IDX["act_bytes"]]                       # (p, nch)
    dense_t, moe_t = _transient(prof)
    n_dense = prof.counts[held, 0].sum(axis=1)
    n_moe = prof.counts[held, 1].sum(axis=1)
    transient = np.maximum(np.where(n_dense > 0, dense_t, 0.0), np.where(n_moe > 0, moe_t, 0.0))
    peak = np.array([float((live_counts(prof.schedule, p, prof.units, prof.v, s) @ act_chunk[s]).max())
                     for s in range(p)])
    return np.stack([params, grads, opt, peak + transient], axis=1)
