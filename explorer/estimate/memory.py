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
from ..compression import residual_bytes
from ..schedules.registry import Schedule
from ..taskgraph.techniques.optimizer import GRAD_BYTES, OPTIMIZER_STATE_BYTES, PARAM_BYTES
from .chunk_basis import F_IDX
from .keys import memo_table
from .profile import RowProfile
from .program import Program, compile_program, program_units

_TRANSIENT = memo_table()
_TOTALS = memo_table()
_LIVE: dict[tuple, np.ndarray] = memo_table()


def live_counts(schedule: Schedule, p: int, units: int, v: int) -> np.ndarray:
    """(p, K, nch) per stage the distinct vectors of per-chunk activations alive after each op of
    its order (padded with zeros), memoised per shape."""
    key = (schedule.name, p, units, v)
    got = _LIVE.get(key)
    if got is None:
        prog = compile_program(schedule.name, p, v, program_units(schedule, units))
        # The row's own ops, grouped by stage once (in program order within a stage).
        mine = np.flatnonzero(prog.mb < units)
        mine = mine[np.argsort(prog.stage[mine], kind="stable")]
        bounds = np.searchsorted(prog.stage[mine], np.arange(p + 1))
        per = [_stage_counts(prog, schedule.two_directions, mine[bounds[s]:bounds[s + 1]]) for s in range(p)]
        k = max(len(x) for x in per)
        got = np.zeros((p, k, prog.nch))
        for s, x in enumerate(per):
            got[s, :len(x)] = x
        _LIVE[key] = got
    return got


def _stage_counts(prog: Program, two_directions: bool, ops: np.ndarray) -> np.ndarray:
    """The distinct vectors of per-chunk activations alive after each op of one stage's order
    (``ops``: its op indices in program order): the registry's peak_activations replay, with one
    unit of bytes per chunk counted per chunk.

    schedules/pipeline.peak_activations: a forward adds its chunk, the pass completing the
    gradients (B, or W when the backward is split) frees it.  schedules/dualpipe.peak_activations:
    a full backward or a weight-gradient pass frees (an input-gradient pass keeps them for its W),
    and a fused F&B adds the forward's chunk, peaks, then frees the backward's."""
    kind, local, local_b = prog.kind[ops], prog.local[ops], prog.local_b[ops]
    f, b, bi, w, fb = (kind == k for k in range(5))
    if two_directions:
        release = b | w
    else:
        release = w if w.any() else b
    eye = np.eye(prog.nch)
    add = (f | fb)[:, None] * eye[local]
    free = release[:, None] * eye[local] + fb[:, None] * eye[local_b]
    after = np.cumsum(add - free, axis=0)
    peak_inside = (after + fb[:, None] * eye[local_b])[fb]       # a fused pair, between its halves
    seen = np.vstack([np.zeros((1, prog.nch)), after, peak_inside])
    # np.unique(seen, axis=0), without it: its first call imports numpy.ma (~30 ms of a sweep's
    # first call); the rows are small counts, exact as floats.
    return np.array(sorted(set(map(tuple, seen.tolist()))), dtype=seen.dtype).reshape(-1, prog.nch)


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
    return stage_memory_at(prof, (prof.units,))[0]


def stage_memory_at(prof: RowProfile, units: tuple[int, ...]) -> list[np.ndarray]:
    """:func:`stage_memory` of ``prof`` as if it ran each count of ``units`` (the estimator's fast
    mode reads two): the parameters, gradients and optimizer state are the same at every count, so
    they are computed once; the activations' peak is replayed per count."""
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
    comp = sc.communication.compression
    if comp.active:      # error-feedback residual, as analysis/memory.class_memory adds it
        opt = opt + np.array([residual_bytes(comp, d, e, g, h) for d, e, g, h in zip(
            dense.tolist(), expert.tolist(), nd.tolist(), ne.tolist(), strict=True)])
    counts = prof.counts[held]                                           # (p, nch, ROLES)
    dense_t, moe_t = _transient(prof)
    transient = np.maximum(np.where(counts[..., 0].sum(-1) > 0, dense_t, 0.0),
                           np.where(counts[..., 1].sum(-1) > 0, moe_t, 0.0))
    act = prof.feat[held, F_IDX["act_bytes"]]                            # (p, nch)
    out = []
    for u in units:
        peak = np.einsum("skc,sc->sk", live_counts(prof.schedule, p, u, prof.v), act).max(axis=1)
        out.append(np.stack([params, grads, opt, peak + transient], axis=-1))
    return out
