"""Per-chunk work as a linear combination of a few priced pieces, each priced once.

taskgraph/chunks.chunk_work prices a pipeline chunk by adding up its layers (layer_parts, with every
technique applied) and, on the first and last chunk, the workload's edges (embedding, output
layer): every figure of a ChunkWork is a sum over those pieces.  The estimator prices workloads
whose layers come in at most two kinds (explorer/workloads/registry.py ``estimator``: a
transformer's dense and MoE layers), so the chunk of ``n0`` layers of the first kind and ``n1`` of
the second, first and/or last, is exactly

    n0 * [one layer of kind 0] + n1 * [one layer of kind 1] + first * [first edge] + last * [last edge]

where each bracket is chunk_work itself, called once on a chunk holding only that piece (a middle
chunk of one layer; an end chunk of no layer; the single chunk of a one-chunk pipeline for both
ends at once).  :func:`basis` memoises those calls per compute key, the shapes of the groups the
stage talks to and the options chunk_work reads; :data:`FEATURES` is the order of the numbers kept.
The engine's split of layers over chunks (IterationBuilder._split) is pricing/split.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from ..config import Scenario
from ..physics.hardware import ComputeModel
from ..taskgraph.chunks import ChunkContext, ChunkWork, chunk_work
from ..workloads.registry import workload_for
from ..workloads.spec import WorkloadSpec
from .keys import RowNetwork, compute_key, intern, memo_table

PARTS = ("compute", "recompute", "weight-grad", "tp", "cp", "ep", "dp")   # a pass's parts, in order
COMPUTE_PARTS = ("compute", "recompute", "weight-grad")
FEATURES = (*(f"fwd.{k}" for k in PARTS), *(f"bwd.{k}" for k in PARTS),
            "hidden_f", "hidden_b", "fsdp_hidden_f", "fsdp_hidden_b", "hidden_f.cp", "hidden_b.cp",
            "hw_flops", "model_flops", "params", "expert_params", "act_bytes", "fsdp_bytes",
            "fp8_params", "fp8_gemms", "fp8_layer_params")
F_IDX = {k: i for i, k in enumerate(FEATURES)}
FWD = slice(0, len(PARTS))
BWD = slice(len(PARTS), 2 * len(PARTS))
# A piece per role: a layer of the workload's first and second kind (a transformer's dense and MoE
# layer), the first and the last edge, both edges on a one-chunk pipeline.
ROLES = ("kind0", "kind1", "first", "last", "only")
KINDS = 2                      # layer kinds the estimator's pieces describe


@dataclass(frozen=True)
class Costs:
    """What a compute key prices once: the workload's description and the compute model."""

    spec: WorkloadSpec
    cm: ComputeModel


_COSTS = memo_table()
_BASES = memo_table()


def _remember(table: dict, key, value):
    table[key] = value
    return value


def costs(sc: Scenario, ckey: int | None = None) -> Costs:
    """The workload description and compute model of ``sc`` (memoised per compute key).  A row its
    family refuses (registry.problem) is priced all the same here: many.needs_simulation sends it
    to the simulation, which says why."""
    ckey = compute_key(sc) if ckey is None else ckey
    out = _COSTS.get(ckey)
    if out is None:
        out = _remember(_COSTS, ckey, Costs(workload_for(sc.model).spec(sc), ComputeModel.for_scenario(sc)))
    return out


def chunk_counts(spec: WorkloadSpec, split: tuple[int, ...]) -> np.ndarray:
    """(chunks, 5) coefficients of each chunk on :data:`ROLES`: its layers of kind 0 and of kind 1
    (the layers of each run of that kind inside the chunk), holds the first edge, holds the last,
    is the only chunk (both ends, priced together).  Layers of further kinds are not counted: such
    workloads are left to the simulation (registry ``estimator``)."""
    n = len(split)
    counts = np.asarray(split, dtype=float)
    first = np.fromiter(accumulate((0, *split[:-1])), float, n)
    end = first + counts
    out = np.zeros((n, len(ROLES)))
    at = 0
    for kind, run in spec.runs:
        if kind < KINDS:
            out[:, kind] += np.clip(np.minimum(end, at + run) - np.maximum(first, at), 0, None)
        at += run
    if n == 1:
        out[0, 4] = 1.0
    else:
        out[0, 2] = 1.0
        out[-1, 3] = 1.0
    return out


def _features(ch: ChunkWork) -> np.ndarray:
    fwd, bwd = dict(ch.fwd_parts), dict(ch.bwd_parts)
    return np.array([*(fwd.get(k, 0.0) for k in PARTS), *(bwd.get(k, 0.0) for k in PARTS),
                     sum(v for _, v in ch.hidden_f), sum(v for _, v in ch.hidden_b),
                     ch.fsdp_hidden[0], ch.fsdp_hidden[1], dict(ch.hidden_f).get("cp", 0.0),
                     dict(ch.hidden_b).get("cp", 0.0), ch.hw_flops, ch.model_flops, ch.params,
                     ch.expert_params, ch.act_bytes, ch.fsdp_bytes, ch.fp8_params, ch.fp8_gemms,
                     ch.fp8_layer_params])


def pricing_signature(net: RowNetwork, sig: tuple) -> tuple:
    """What collectives.cost reads of the groups ``sig`` and of the library options, so that networks
    that differ only where no call of these groups looks price a piece alike.  A group inside one node
    (not spanning boundary 1, hence no outer one either) reads its size, its members per domain, the
    scale-up share, the latencies (NCCL's net hop shift reads latencies[1]) and the wiring: the shares
    of boundaries it does not span are never read (collective_algorithms.base.spanned and crossing,
    collectives._pairwise, collective_algorithms.alpha_beta, moe_routing.hierarchical_pass loop over
    spanned boundaries only).  When no group of
    ``sig`` leaves a node, the options that only apply across nodes (SHARP, LL128 over the fabric,
    the fabric's channels, NICs per node: each read under ``nodes > 1`` or ``spans(1)``) are left out
    too.  Why: a sweep over the NIC bandwidth then prices TP/CP/EP pieces inside a node once."""
    o = net.net.options
    inside = [not s.spans(1) for s in sig]
    shapes = tuple(s if not ok else ("in-node", s.n, s.per_domain, s.shares[0], s.latencies, s.up_kind,
                                     s.wan_loads) for s, ok in zip(sig, inside, strict=True))
    opts = (o.library, o.protocol, o.arch, o.nvls) if all(inside) else o
    return shapes, opts, net.net.algorithm, net.free


def basis_key(sc: Scenario, ckey: int, netsig: int, ideal: frozenset[str], tied: bool) -> int:
    """The interned key of :func:`basis`: the compute key, the stage's interned pricing signature
    (:func:`pricing_signature`), and the options chunk_work reads.  ZeRO enters only as ``zero == 3``
    (chunks.py and layer.py test nothing else), and the prefetch depth and dp overlap only then
    (they reach chunk_work through fsdp_cost alone); the MoE dispatcher (layer._ep_time)."""
    com = sc.communication
    fsdp = sc.parallelism.zero == 3
    extra = (com.prefetch_layers, com.dp_overlap) if fsdp else ()
    # The MoE dispatcher decides how the EP calls are priced (taskgraph/techniques/moe_routing.py).
    return intern(("basis", ckey, netsig, ideal, tied, fsdp, com.tp_overlap, com.moe_dispatcher, *extra))


def basis(sc: Scenario, ckey: int, net: RowNetwork, stage: int, ideal: frozenset[str], tied: bool,
          key: int) -> tuple[np.ndarray, np.ndarray]:
    """(5, features) of one piece per role priced on ``stage`` (whose pricing key is ``key``, from
    :func:`basis_key`), and (5,) the bf16 bytes of the largest layer of each piece that ZeRO-3
    gathers (fsdp_layer_bytes)."""
    out = _BASES.get(key)
    if out is not None:
        return out
    c = costs(sc, ckey)
    rows, layer_bytes = [], []
    for k, role in enumerate(ROLES):
        chunks = 1 if role == "only" else 3
        # RowNetwork stands in for Network with the same pricing methods (pricing/keys.py); the
        # context's field names the simulator's class.
        ctx = ChunkContext(sc, net, c.cm, ideal, c.spec, chunks, tied)  # type: ignore[arg-type]
        if k < KINDS:
            at = c.spec.first_layer_of(k)     # None: no layer of that kind, the piece is never used
            ch = chunk_work(ctx, 1, stage, at, 1) if at is not None else None
        else:
            ch = chunk_work(ctx, {"first": 0, "last": 2, "only": 0}[role], stage, 0, 0)
        rows.append(_features(ch) if ch is not None else np.zeros(len(FEATURES)))
        layer_bytes.append(ch.fsdp_layer_bytes if ch is not None else 0.0)
    return _remember(_BASES, key, (np.array(rows), np.array(layer_bytes)))
