"""Generic communication edges (explorer/workloads/spec.Edge): a workload's calls on a dimension
that has no field of its own on LayerCost — a recommendation model's embedding all-to-all on
``emb`` — priced on that dimension's group (dimensions.Dimension.group) and turned into what the
rest of the simulator reads.

- A *blocking* edge is a part of the pass that makes it, on its dimension's category (like the
  MoE all-to-all: the GPU waits for it), and its calls are the chunk's per-unit link calls.
- An *overlapped* edge runs on its dimension's own stream (the engine's stream, the Gantt's lane
  named after it).  Forward: prefetched one unit ahead — the call for unit k+1 starts with unit
  k's forward and unit k+1's forward waits for it; the one for the next iteration's first unit
  starts with the last unit's forward and the iteration's end (the optimizer step) waits for it
  (TorchRec's train pipeline, Ivchenko et al., RecSys 2022, Sec. 3.3: the next batch's sparse
  lookups and all-to-all under the current batch's dense forward and backward).  Backward: after
  the backward pass that produces its buffer; the iteration's end waits for it.

Bytes: each edge's bus bytes per unit (nccl-tests convention, size x bus factor), whether it
blocks or not, are the chunk's ``edge_bytes`` per reported dimension (comm_bytes_per_gpu).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dimensions
from ..engine.records import LinkCall, OverlapInfo, priced_link
from ..engine.scheduler import Task, TaskGraph
from ..network.collectives import bus_factor
from ..workloads.spec import Edge, LayerCost
from .techniques.link_sharing import flow

Parts = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class EdgeCall:
    """The overlapped edges of one dimension and phase of a chunk, per pipeline unit, as priced:
    what one task on the dimension's stream takes and moves."""

    dim: str                         # the registry's dimension (its stream and lane: reported_as)
    phase: str                       # fwd | bwd
    op: str
    size_bytes: float                # per call (the first edge's: what a hover shows)
    time_s: float                    # every call of the unit, one after another
    bus_bytes: float
    group: int
    algorithm: str
    tier: str
    busbw_GBps: float
    label: str
    links: tuple[LinkCall, ...]      # per unit
    # The tier that limits the call and its seconds on the wire (link_sharing.flow): the engine
    # shares that link with another stream's call limited by it (a gradient bucket).
    tier_limit: str = ""
    wire_s: float = 0.0


def _priced(ctx, e: Edge, stage: int):
    return ctx.net.cost(e.op, e.size_bytes, e.dim, stage)


def blocking_parts(ctx, lc: LayerCost, stage: int) -> tuple[Parts, Parts]:
    """(forward, backward) parts of ``lc``'s blocking edges: seconds per reported dimension."""
    f: list[tuple[str, float]] = []
    b: list[tuple[str, float]] = []
    for e in lc.edges:
        if e.overlap or e.size_bytes <= 0:
            continue
        (f if e.phase == "fwd" else b).append((dimensions.reported_as(e.dim), _priced(ctx, e, stage).time_s))
    return tuple(f), tuple(b)


def edge_bytes(ctx, lc: LayerCost, stage: int) -> Parts:
    """Bus bytes per unit of every edge of ``lc`` (blocking or not), per reported dimension."""
    out: list[tuple[str, float]] = []
    for e in lc.edges:
        if e.size_bytes > 0:
            n = ctx.net.group_size(e.dim, stage)
            out.append((dimensions.reported_as(e.dim), e.size_bytes * bus_factor(e.op, n)))
    return tuple(out)


def blocking_links(ctx, lc: LayerCost, stage: int) -> list[LinkCall]:
    """The network calls of ``lc``'s blocking edges per unit (the chunk's link calls)."""
    out: list[LinkCall] = []
    for e in lc.edges:
        if not e.overlap:
            out += priced_link(ctx.net, e.dim, e.op, e.size_bytes, stage, 1)
    return out


def overlapped(ctx, lc: LayerCost, count: int, stage: int) -> list[EdgeCall]:
    """``count`` layers of ``lc``'s overlapped edges, one EdgeCall per edge (merged per chunk by
    :func:`merged`)."""
    out = []
    for e in lc.edges:
        if not e.overlap or e.size_bytes <= 0:
            continue
        cc = _priced(ctx, e, stage)
        tier, wire = flow(ctx.sc, cc)
        out.append(EdgeCall(e.dim, e.phase, e.op, e.size_bytes, count * cc.time_s,
                            count * e.size_bytes * bus_factor(e.op, cc.n), cc.n, cc.algorithm,
                            cc.limited_by, cc.busbw_GBps, e.label or e.op,
                            tuple(c.scaled(count) for c in priced_link(ctx.net, e.dim, e.op, e.size_bytes,
                                                                       stage, 1)), tier, count * wire))
    return out


def merged(calls: list[EdgeCall]) -> tuple[EdgeCall, ...]:
    """One EdgeCall per (dimension, phase), in first-seen order: a chunk's calls on one stream in
    one unit run one after another, so their seconds, bytes and link calls add up."""
    acc: dict[tuple[str, str], EdgeCall] = {}
    for c in calls:
        key = (c.dim, c.phase)
        got = acc.get(key)
        if got is None:
            acc[key] = c
        else:
            acc[key] = EdgeCall(c.dim, c.phase, got.op, got.size_bytes, got.time_s + c.time_s,
                                got.bus_bytes + c.bus_bytes, got.group, got.algorithm, got.tier,
                                got.busbw_GBps, got.label, got.links + c.links,
                                got.tier_limit or c.tier_limit, got.wire_s + c.wire_s)
    return tuple(acc.values())


def first_calls(ctx, kinds: tuple[LayerCost, ...], stage: int) -> dict:
    """The main edge call of each reported dimension among the layer kinds, as priced (what the
    chunk's ``comm`` shows: op, bytes, group, algorithm, tier, bus bandwidth, seconds): the longest,
    the first of equals -- a DLRM's pooled embeddings rather than its ids, or table-row-wise's
    longer step."""
    out: dict = {}
    for lc in kinds:
        for e in lc.edges:
            dim = dimensions.reported_as(e.dim)
            if e.size_bytes <= 0 or ctx.net.group_size(e.dim, stage) <= 1:
                continue
            cc = _priced(ctx, e, stage)
            if dim in out and cc.time_s <= out[dim]["time_s"]:
                continue
            out[dim] = {"op": e.op, "bytes": e.size_bytes, "group": cc.n, "algorithm": cc.algorithm,
                        "tier": cc.limited_by, "busbw_GBps": cc.busbw_GBps, "time_s": cc.time_s}
    return out


def _task(s: int, c: EdgeCall, mb: int, local: int, deps: list, count: float) -> Task:
    stream = dimensions.reported_as(c.dim)
    info = OverlapInfo(mb, local, c.size_bytes, c.group, f"{c.label} ({c.phase}, overlapped)", c.dim,
                       c.bus_bytes, 0, 0.0, c.algorithm, c.tier, c.busbw_GBps)
    return Task(s, stream, stream, c.time_s, deps, 0, ((stream, c.time_s),), info,
                tuple(x.scaled(count) for x in c.links), tier=c.tier_limit, wire=c.wire_s)


def edge_tasks(g: TaskGraph, ids: dict, chunk_edges, units_share: float) -> dict[int, list[int]]:
    """The overlapped edges' tasks (module docstring) for compute tasks ``ids`` ((F|B|W, rank,
    lane, unit, local chunk) -> task, the builder's); ``chunk_edges(rank, local)`` the chunk's
    EdgeCalls; ``units_share`` the simulated units' share of one iteration (m / m_sim: two
    iterations simulated back to back count as one).  Returns rank -> the tasks the iteration's
    end waits for."""
    ends: dict[int, list[int]] = {}
    lanes: dict[tuple[int, int, int], list[int]] = {}
    for (kind, s, lane, mb, local) in ids:
        if kind == "F":
            lanes.setdefault((s, lane, local), []).append(mb)
    for (s, lane, local), mbs in lanes.items():
        calls = chunk_edges(s, local)
        if not calls:
            continue
        mbs.sort()
        for c in calls:
            if c.phase == "fwd":
                # Unit k+1's call starts with unit k's forward; the next iteration's first unit's
                # starts with the last forward.
                for i, mb in enumerate(mbs):
                    f = ids[("F", s, lane, mb, local)]
                    tid = g.add(_task(s, c, mb + 1, local, [(f, 0.0)], units_share))
                    if i + 1 < len(mbs):
                        g.tasks[ids[("F", s, lane, mbs[i + 1], local)]].deps.append((tid, 1.0))
                    else:
                        ends.setdefault(s, []).append(tid)
            else:
                for mb in mbs:
                    b = ids[("B", s, lane, mb, local)]
                    ends.setdefault(s, []).append(g.add(_task(s, c, mb, local, [(b, 1.0)], units_share)))
    return ends
