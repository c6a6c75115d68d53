"""Per-GPU memory of every stage of many rows, as analysis/memory.class_memory computes it.

Parameters, gradients and optimizer state of the chunks a stage holds, sharded over the
data-parallel group as the ZeRO stage says (Rajbhandari et al., ZeRO, SC20, Fig. 1), times the
weight versions the schedule stashes (PipeDream); under ZeRO-3 the gathered working set; the
weights and state a chunk holds beside them (LayerCost/EdgeCost.held_bytes: LoRA's frozen base,
workloads/transformer/lora.py), as taskgraph/chunks.chunk_held gives them per piece; and
activations at the peak of the stage's program order plus one recomputed layer's working set (the
workload's LayerCost.recompute_bytes).  The peak replays the order once per shape as *counts* of
each chunk's activations alive (:func:`live_counts`), so that a row's peak is a maximum of dot
products with its own per-chunk bytes — the same replay as the registry's peak_activations
(schedules/pipeline.py, schedules/dualpipe.py), whose result it equals for any bytes.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..network.compression import residual_bytes
from ..schedules.registry import Schedule
from ..taskgraph.builder import IDEAL_ASPECTS
from ..taskgraph.chunks import chunk_held
from ..taskgraph.layout import layout_for
from ..taskgraph.techniques.fp8_memory import fp8_memory_bytes
from ..taskgraph.techniques.fsdp import zero3_working_set
from ..taskgraph.techniques.nccl_buffers import nccl_reserved_bytes
from ..taskgraph.techniques.optimizer import grad_buffer_bytes, optimizer_state_bytes, param_bytes
from .chunk_basis import F_IDX, KINDS, ROLES, costs
from .keys import memo_table
from .profile import RowProfile
from .program import Program, serving_program

_TRANSIENT = memo_table()
_HELD = memo_table()
_TOTALS = memo_table()
_LIVE: dict[tuple, np.ndarray] = memo_table()


def live_counts(schedule: Schedule, p: int, units: int, v: int) -> np.ndarray:
    """(p, K, nch) per stage the distinct vectors of per-chunk activations alive after each op of
    its order (padded with zero vectors, which every stage has before its first op), memoised per
    shape."""
    key = (schedule.name, p, units, v)
    got = _LIVE.get(key)
    if got is None:
        prog = serving_program(schedule, p, v, units)
        # The row's own ops, grouped by stage once (in program order within a stage).
        mine = np.flatnonzero(prog.mb < units)
        mine = mine[np.argsort(prog.stage[mine], kind="stable")]
        got = _LIVE[key] = _stage_counts(prog, schedule.fused_pairs, mine, p)
    return got


def _stage_counts(prog: Program, fused_pairs: bool, ops: np.ndarray, p: int) -> np.ndarray:
    """(p, K, nch) the distinct vectors of per-chunk activations alive after each op of each stage's
    order (``ops``: op indices, stage after stage, each stage's in program order): the registry's
    peak_activations replay, with one unit of bytes per chunk counted per chunk, every stage at once.

    schedules/pipeline.peak_activations: a forward adds its chunk, the pass completing the
    gradients (B, or W when the backward is split) frees it.  schedules/dualpipe.peak_activations:
    a full backward or a weight-gradient pass frees (an input-gradient pass keeps them for its W),
    and a fused F&B adds the forward's chunk, peaks, then frees the backward's."""
    nch = prog.nch
    kind, local, local_b, stage = prog.kind[ops], prog.local[ops], prog.local_b[ops], prog.stage[ops]
    f, b, bi, w, fb = (kind == k for k in range(5))
    if fused_pairs:                   # DualPipe's and DualPipeV's accounting
        release = b | w
    else:
        # Per stage, as the registry decides it per order: W frees where the stage has W passes.
        has_w = np.bincount(stage[w], minlength=p) > 0
        release = np.where(has_w[stage], w, b)
    eye = np.eye(nch)
    add = (f | fb)[:, None] * eye[local]
    free = release[:, None] * eye[local] + fb[:, None] * eye[local_b]
    # Counts after each op: a running sum restarted at each stage's first op (small integers, exact).
    run = np.cumsum(add - free, axis=0)
    starts = np.searchsorted(stage, np.arange(p))
    before = np.vstack([np.zeros((1, nch)), run])[starts]              # (p, nch) sum before each stage
    after = run - before[stage]
    inside = (after + fb[:, None] * eye[local_b])[fb]                   # a fused pair, between its halves
    vecs = np.vstack([np.zeros((p, nch)), after, inside])
    owner = np.concatenate((np.arange(p), stage, stage[fb]))
    # Distinct vectors per stage: each (stage, vector) as one integer, sorted, repeats dropped
    # (np.unique's first call imports numpy.ma: ~30 ms of a sweep's first call).
    base = int(vecs.max(initial=0)) + 1
    if p * float(base) ** nch >= 2.0 ** 62:                         # codes would overflow int64
        return _distinct_per_stage(vecs, owner, p)
    code = owner.astype(np.int64)
    for c in range(nch):
        code = code * base + vecs[:, c].astype(np.int64)
    code = np.sort(code)
    code = code[np.concatenate(([True], code[1:] != code[:-1]))]
    digits = np.empty((len(code), nch))
    rest = code
    for c in range(nch - 1, -1, -1):
        rest, digits[:, c] = np.divmod(rest, base)
    per = np.bincount(rest, minlength=p)
    first = np.concatenate(([0], np.cumsum(per)[:-1]))
    out = np.zeros((p, int(per.max()), nch))
    out[rest, np.arange(len(code)) - first[rest]] = digits
    return out


def _distinct_per_stage(vecs: np.ndarray, owner: np.ndarray, p: int) -> np.ndarray:
    """:func:`_stage_counts`' last step in Python sets, for counts too large to code as integers."""
    per = [sorted(set(map(tuple, vecs[owner == s].tolist()))) for s in range(p)]
    out = np.zeros((p, max(map(len, per)), vecs.shape[1]))
    for s, rows in enumerate(per):
        out[s, :len(rows)] = rows
    return out


def _transient(prof: RowProfile) -> tuple[float, ...]:
    """Bytes one recomputed layer of each of the estimator's layer kinds holds again in its
    backward (memory.recompute_transient; 0 for a kind the workload does not have)."""
    got = _TRANSIENT.get(prof.ckey)
    if got is None:
        kinds = costs(prof.sc, prof.ckey).spec.kinds
        got = _TRANSIENT[prof.ckey] = tuple(kinds[k].recompute_bytes if k < len(kinds) else 0.0
                                            for k in range(KINDS))
    return got


def _held(prof: RowProfile) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per role of chunk_basis.ROLES, the bytes of weights (LayerCost/EdgeCost.held_bytes) and of
    optimizer state (held_state_bytes) its piece holds beside its parameters, as chunk_work counts
    them (taskgraph/chunks.chunk_held: a middle chunk of one layer of each kind; the ends with
    their tail layers, the output layer's copy of tied embeddings left out where one GPU holds both
    ends), memoised on what it reads: the compute key, the ideal pipeline and the schedule's shape."""
    sc, par = prof.sc, prof.sc.parallelism
    key = (prof.ckey, par.ideal_pipeline, prof.schedule.name, prof.p, prof.v)
    got = _HELD.get(key)
    if got is None:
        spec = costs(sc, prof.ckey).spec
        ideal = IDEAL_ASPECTS if par.ideal_pipeline else frozenset()
        tied = sc.model.tied_embeddings and layout_for(prof.schedule, prof.p, prof.v).ends_on_one_rank
        # The pieces of chunk_basis.basis: one middle layer of each kind, then the ends alone.
        ends = {"kind0": (False, False), "kind1": (False, False), "first": (True, False),
                "last": (False, True), "only": (True, True)}
        pieces = []
        for k, role in enumerate(ROLES):
            layer = [(spec.kinds[k], 1)] if k < KINDS and k < len(spec.kinds) else []
            pieces.append(chunk_held(spec, layer, *ends[role], ideal, tied))
        got = _HELD[key] = (tuple(h for h, _ in pieces), tuple(s for _, s in pieces))
    return got


def memory_total(prof: RowProfile) -> float:
    """Bytes per GPU of the busiest stage (max over stages of the total), memoised on what it
    reads (RowProfile.memory_key: no network, so a sweep over bandwidths prices it once)."""
    return float(memory_totals([prof])[0])


def memory_totals(profs: Sequence[RowProfile]) -> np.ndarray:
    """:func:`memory_total` of every row: the keys not memoised yet priced together, one
    :func:`stage_memory_rows` per shape (schedule, p, v)."""
    out = np.empty(len(profs))
    todo: dict[tuple, dict[tuple, RowProfile]] = {}
    for i, pr in enumerate(profs):
        got = _TOTALS.get(pr.memory_key)
        if got is None:
            todo.setdefault((pr.schedule.name, pr.p, pr.v), {}).setdefault(pr.memory_key, pr)
        else:
            out[i] = got
    if todo:
        for rows in todo.values():
            group = list(rows.values())
            per = stage_memory_rows(group, [pr.units for pr in group])
            for key, total in zip(rows, per.sum(axis=2).max(axis=1).tolist(), strict=True):
                _TOTALS[key] = total
        for i, pr in enumerate(profs):
            out[i] = _TOTALS[pr.memory_key]
    return out


def stage_memory(prof: RowProfile) -> np.ndarray:
    """(p, 5) bytes per GPU of each stage: parameters, gradients, optimizer state, activations, NCCL
    (analysis/memory.class_memory)."""
    return stage_memory_rows([prof], [prof.units])[0]


def stage_memory_at(prof: RowProfile, units: tuple[int, ...]) -> list[np.ndarray]:
    """:func:`stage_memory` of ``prof`` as if it ran each count of ``units`` (the estimator's fast
    mode reads two)."""
    return list(stage_memory_rows([prof] * len(units), list(units)))


def stage_memory_rows(profs: Sequence[RowProfile], units: Sequence[int]) -> np.ndarray:
    """(rows, p, 5) :func:`stage_memory` of rows of one shape (schedule, p, v), row r as if it ran
    ``units[r]`` units, as arrays over rows: each distinct layout's parameters, bytes and layer
    counts gathered once, the activations' peak replayed once per distinct count.  Row r's numbers
    do not depend on the other rows (the same operations per element, whatever the batch)."""
    first = profs[0]
    sched, p, held = first.schedule, first.p, first.holds
    layouts: dict[int, int] = {}
    lay = [layouts.setdefault(id(pr.layout), len(layouts)) for pr in profs]
    distinct = {k: pr.layout for pr, k in zip(profs, lay, strict=True)}
    li = np.array(lay)
    L = [distinct[k] for k in range(len(distinct))]
    dense = np.stack([x.params for x in L]).sum(axis=2)[li]             # (g, p)
    expert = np.stack([x.expert for x in L]).sum(axis=2)[li]
    groups = np.stack([pr.dp_groups for pr in profs])                   # (g, p, 2)
    nd = groups[..., 0]
    ne = np.where(expert > 0, groups[..., 1], 1)
    zero = np.array([pr.sc.parallelism.zero for pr in profs])[:, None]
    split, whole = dense / nd + expert / ne, dense + expert

    def shard(sharded: np.ndarray) -> np.ndarray:
        return np.where(sharded, split, whole)

    versions = np.array([sched.weight_versions(s, p) for s in range(p)])
    weight = np.array([param_bytes(pr.sc) for pr in profs])[:, None]     # 4 B under fp32 training
    params = weight * shard(zero >= 3) * versions
    grads = np.array([grad_buffer_bytes(pr.sc) for pr in profs])[:, None] * shard(zero >= 2)   # main_grad
    # FP8 runs: cached FP8 weight copies and scaling state, as analysis/memory.class_memory.
    fp8 = [pr for pr in profs if pr.sc.training.dtype == "fp8"]
    if fp8:
        fsum = [np.stack([x.feat[:, F_IDX[k]] for x in L])[li][:, held].sum(axis=2)
                for k in ("fp8_params", "fp8_gemms")]
        big = np.stack([x.fp8_layer for x in L])[li][:, held].max(axis=2)
        for r, pr in enumerate(profs):
            params[r] = params[r] + fp8_memory_bytes(pr.sc, fsum[0][r], fsum[1][r], big[r],
                                                     (nd[r] > 1) | (ne[r] > 1))
    if (zero >= 3).any():
        # ZeRO-3 working set: the gathered layer, prefetch_layers more, one layer's full gradients.
        layer = np.stack([x.layer_bytes for x in L])[li][:, held].max(axis=2)
        z3 = (zero >= 3) & ((nd > 1) | (ne > 1))      # one rank gathers nothing (analysis/memory.py)
        # Per row, as analysis/memory.class_memory (techniques/fsdp.zero3_working_set).
        # Only groups of more than one rank gather (analysis/memory.class_memory).
        sharded = np.where(nd > 1, dense, 0.0) + np.where(ne > 1, expert, 0.0)
        ws = np.array([zero3_working_set(pr.sc, param_bytes(pr.sc) * sharded[r], layer[r])
                       for r, pr in enumerate(profs)])
        params = np.where(z3, params + ws[:, 0], params)
        grads = np.where(z3, grads + ws[:, 1], grads)
    state = np.array([optimizer_state_bytes(pr.sc) for pr in profs])[:, None]
    opt = state * shard(zero >= 1)
    for r, pr in enumerate(profs):
        comp = pr.sc.communication.compression
        if comp.active:      # error-feedback residual, as analysis/memory.class_memory adds it
            opt[r] = opt[r] + np.array([residual_bytes(comp, d, e, g, h) for d, e, g, h in zip(
                dense[r].tolist(), expert[r].tolist(), nd[r].tolist(), ne[r].tolist(), strict=True)])
    counts = np.stack([x.counts for x in L])[li][:, held]              # (g, p, nch, ROLES)
    # Held weights and their state (LoRA's frozen base), as analysis/memory.class_memory adds them.
    kept = np.array([_held(pr) for pr in profs])                        # (g, 2, ROLES)
    params = params + np.einsum("gpcr,gr->gp", counts, kept[:, 0])
    opt = opt + np.einsum("gpcr,gr->gp", counts, kept[:, 1])
    tr = np.array([_transient(pr) for pr in profs])                     # (g, 2) kind 0, kind 1
    transient = np.maximum(np.where(counts[..., 0].sum(-1) > 0, tr[:, :1], 0.0),
                           np.where(counts[..., 1].sum(-1) > 0, tr[:, 1:], 0.0))
    act = np.stack([x.feat[:, F_IDX["act_bytes"]] for x in L])[li][:, held]   # (g, p, nch)
    peak = np.empty((len(profs), p))
    by_units: dict[int, list[int]] = {}
    for r, u in enumerate(units):
        by_units.setdefault(u, []).append(r)
    for u, rows in by_units.items():
        live = live_counts(sched, p, u, first.v)                        # (p, K, nch)
        # Each row's peak: the largest of its stage's live vectors dotted with its chunks' bytes.
        peak[rows] = (live[None] * act[rows][:, :, None, :]).sum(axis=3).max(axis=2)
    # NCCL's communicator buffers, the same on every stage (analysis/memory.class_memory).
    reserved = np.broadcast_to(np.array([nccl_reserved_bytes(pr.sc) for pr in profs])[:, None], params.shape)
    return np.stack([params, grads, opt, peak + transient, reserved], axis=-1)
