"""Per-GPU memory over the iteration: what each GPU class holds at every instant of the timeline.

The static part (weights, gradients, optimizer state, as the ZeRO stage shards them) is held
throughout; activations follow the passes as the simulated schedule ran them, with the rule the
memory report's peak replays (explorer/schedules/pipeline.peak_activations, dualpipe's likewise):
a forward stores its chunk's activations (one pipeline unit, ChunkWork.act_bytes) layer by layer,
so the level climbs linearly through the forward, and the pass that completes its gradients — the
backward, or the weight-gradient pass when the schedule splits them (zero-bubble, DualPipe) —
frees them layer by layer, so it falls linearly through that pass; a fused F&B adds its forward's
at its start and frees its backward's at its end (DualPipe's replay).  Passes on one GPU's compute
stream do not overlap, so the curve's vertices are the report's replay at pass boundaries: its
maximum plus the recompute working set of one layer (activations.py; a transient inside a
backward, kept as ``transient``) is exactly the report's activation peak.

This is the view that makes 1F1B's bounded memory against GPipe's obvious (Narayanan et al. SC21,
Sec. 2.2: 1F1B keeps at most p micro-batches in flight, GPipe all m).

Activation offloading (``training.offload_activations_layers``): a forward stores its offloaded
layers' activations too, and each leaves HBM when its device-to-host copy completes (Transformer
Engine's CPU offload frees the GPU tensor once the copy to pinned host memory is done); it comes
back when its host-to-device copy starts (the buffer it is copied into is allocated then), and the
backward frees it with the rest.  The copies are the ``offload`` lane's rows of the timeline
(explorer/result/timeline.py offload_rows: one per layer, serialised on the copy engine), each
moving its seconds times the host link's bytes per second.  The curve then follows the copies as
timed; the memory report instead assumes Transformer Engine's double buffer (one offloaded layer
in HBM on top of what stays, activations.recompute_working_bytes), so with offloading the curve's
maximum is its own, not the report's peak less the transient.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..analysis.memory import recompute_transient
from ..engine.records import PassInfo
from ..engine.scheduler import Task
from ..fold.arrays.lazy import resolved
from ..fold.tasks import FoldedTasks
from ..physics.host_link import host_link_Bps
from ..taskgraph.make import iteration_builder
from ..vocabulary import OFFLOAD
from .timeline import build_timeline


@dataclass(frozen=True)
class MemoryCurve:
    """One GPU class's memory over time: piecewise linear through ``points`` (time s, bytes), two
    points at one time being a jump; ``static`` bytes (weights, gradients, optimizer, NCCL's
    communicator buffers)."""

    cls: int
    name: str
    static: float
    points: tuple[tuple[float, float], ...]       # (time s, activation bytes at that time)
    transient: float = 0.0        # one recomputed layer's working set, live inside a backward

    def at(self, t: float) -> float:
        """Activation bytes at time ``t`` (after a jump at ``t``; the last level beyond the end)."""
        pts = self.points
        for (t0, b0), (t1, b1) in zip(pts, pts[1:], strict=False):
            if t0 <= t < t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0)
        return next((b for tt, b in reversed(pts) if tt <= t), 0.0)

    @property
    def peak_activations(self) -> float:
        """The highest activation level reached."""
        return max((b for _, b in self.points), default=0.0)


def memory_timeline(res) -> tuple[MemoryCurve, ...]:
    """Per GPU class of ``res`` (a simulate Result), its memory over the simulated timeline (the
    reduced run of a folded one, the timeline the Gantt draws).

    Classes are pipeline stages here; a run whose classes are not one per stage (replicas that
    differ, windows, exchanges) gives the stages of its first replica (the timeline it draws)."""
    sc = res.scenario
    if res.inference is not None:
        # Serving (issue 37): the weights, and the batch's KV cache with the workspace held through
        # the steady state the timeline shows (explorer/serving/result.py).
        end = max((t.end for t in res.tasks), default=0.0)
        return tuple(MemoryCurve(c.index, c.name, res.memory_by_class[c.index].params,
                                 ((0.0, m.activations), (end, m.activations)))
                     for c in res.classes for m in (res.memory_by_class[c.index],))
    # Chunks read no micro-batch count (IterationBuilder.for_scenario), so a builder of a few
    # micro-batches prices them without building the program order of a huge batch (the
    # simulation folds those; an order of 10^8 units would not fit in memory).  The builder is the
    # simulation's own kind: its network is free under the ideal pipeline.
    p = sc.parallelism
    few = sc.training.micro_batch * sc.dp * 2 * p.pp * p.vpp
    small = replace(sc.training, global_batch=min(few, sc.training.global_batch))
    # The split is the run's own (DualPipe's depends on the unit count: Result.stage_layers).
    b = iteration_builder(replace(sc, training=small), split=res.stage_layers)
    chunks = {(s, c): b.chunk_of(s, c).act_bytes
              for s in range(b.p) for c in range(b.schedule.chunks_per_rank(b.v))}
    # A folded run is followed through its reduced run, as the Gantt draws it (unfolding a
    # 10^5-micro-batch iteration here would build every task again).
    tasks = resolved(res.tasks)
    tasks = tasks.tasks if isinstance(tasks, FoldedTasks) else tasks
    by_cls: dict[int, list] = {}
    for t in tasks:
        if t.stream == "compute" and isinstance(t.info, PassInfo):
            by_cls.setdefault(t.cls, []).append(t)
    # Bytes of the offloaded layers per pipeline unit of each chunk: its copy seconds (each way)
    # times the host link's bytes per second (activations_recipes.offload_seconds).
    bps = host_link_Bps(sc)
    offloaded = {(s, c): b.chunk_of(s, c).offload[1] * bps for s, c in chunks}
    copies = _copy_events(tasks, bps) if any(offloaded.values()) else {}
    out = []
    for cls, tasks in sorted(by_cls.items()):
        stage = res.classes[cls].stage if cls < len(res.classes) else cls
        # (start, end, bytes): a change spread evenly over [start, end] (a jump when they agree).
        events: list[tuple[float, float, float]] = list(copies.get(cls, ()))
        for t in tasks:
            info = t.info
            act = chunks.get((stage, info.chunk), 0.0) + offloaded.get((stage, info.chunk), 0.0)
            if t.kind == "forward":
                events.append((t.start, t.end, act))
            elif t.kind == "F&B":
                # Both halves' activations are live inside the fused pass (DualPipe's replay
                # counts the forward's before it frees the backward's).
                events.append((t.start, t.start, act))
                pair = (stage, info.pair_chunk)
                events.append((t.end, t.end, -chunks.get(pair, 0.0) - offloaded.get(pair, 0.0)))
            elif t.kind == "weight-grad" or (t.kind == "backward"
                                              and any(k == "weight-grad" for k, _ in t.parts)):
                # A full backward (its parts include the weight gradients) or the weight-gradient
                # pass of a split one completes the gradients; an input-gradient pass keeps them.
                events.append((t.start, t.end, -act))
        points = _curve(events)
        mem = res.memory_by_class[cls] if cls < len(res.memory_by_class) else res.memory
        name = res.classes[cls].name if cls < len(res.classes) else f"stage {stage}"
        held = [ch for ch, _ in b.rank_chunks(stage)] if stage < b.p else []
        static = mem.params + mem.grads + mem.optimizer + mem.reserved
        transient = recompute_transient(b, held) if held else 0.0
        out.append(MemoryCurve(cls, name, static, tuple(points), transient))
    return tuple(out)


def _curve(events: list[tuple[float, float, float]]) -> tuple[tuple[float, float], ...]:
    """The piecewise-linear sum of ``events`` (start, end, bytes: a change spread evenly over
    [start, end], a jump when they agree) from (0, 0): a vertex wherever a slope changes, two at
    one time for a jump.  Events may overlap (an offload copy ends inside a forward), so the sum is
    swept over their times rather than chained."""
    slope_at: dict[float, float] = {}
    jump_at: dict[float, float] = {}
    for start, end, delta in events:
        if end > start:
            rate = delta / (end - start)
            slope_at[start] = slope_at.get(start, 0.0) + rate
            slope_at[end] = slope_at.get(end, 0.0) - rate
        else:
            jump_at[start] = jump_at.get(start, 0.0) + delta
    points = [(0.0, 0.0)]
    level = slope = prev = 0.0
    for t in sorted(slope_at.keys() | jump_at.keys()):
        level += slope * (t - prev)
        if points[-1] != (t, max(level, 0.0)):
            points.append((t, max(level, 0.0)))
        if jump_at.get(t):
            level += jump_at[t]
            points.append((t, max(level, 0.0)))
        slope += slope_at.get(t, 0.0)
        prev = t
    return tuple(points)


def _copy_events(tasks: Sequence[Task], bps: float) -> dict[int, list[tuple[float, float, float]]]:
    """Per GPU class, the offload copies' memory events: each device-to-host row frees its bytes
    (seconds x ``bps``) when it ends, each host-to-device row brings them back when it starts — the
    rows the timeline draws on the ``offload`` lane (build_timeline, from the passes that copy)."""
    passes = [t for t in tasks if isinstance(t.info, PassInfo) and t.info.offload]
    out: dict[int, list[tuple[float, float, float]]] = {}
    for r in build_timeline(passes, ()).rows():
        if r["lane"] != OFFLOAD:
            continue
        moved = r["duration_s"] * bps
        if r["detail"].startswith("device→host"):
            out.setdefault(r["gpu_class"], []).append((r["end_s"], r["end_s"], -moved))
        else:
            out.setdefault(r["gpu_class"], []).append((r["start_s"], r["start_s"], moved))
    return out
