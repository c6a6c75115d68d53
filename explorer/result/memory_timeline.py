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
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..analysis.memory import recompute_transient
from ..engine.records import PassInfo
from ..fold.arrays.lazy import resolved
from ..fold.tasks import FoldedTasks
from ..taskgraph.builder import IterationBuilder


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
    # Chunks read no micro-batch count (IterationBuilder.for_scenario), so a builder of a few
    # micro-batches prices them without building the program order of a huge batch (the
    # simulation folds those; an order of 10^8 units would not fit in memory).  The builder is the
    # simulation's own kind: its network is free under the ideal pipeline.
    p = sc.parallelism
    few = sc.training.micro_batch * sc.dp * 2 * p.pp * p.vpp
    small = replace(sc.training, global_batch=min(few, sc.training.global_batch))
    # The split is the run's own (DualPipe's depends on the unit count: Result.stage_layers).
    b = IterationBuilder(replace(sc, training=small), split=res.stage_layers)
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
    out = []
    for cls, tasks in sorted(by_cls.items()):
        stage = res.classes[cls].stage if cls < len(res.classes) else cls
        # (start, end, bytes): a change spread evenly over [start, end] (a jump when they agree).
        events: list[tuple[float, float, float]] = []
        for t in tasks:
            info = t.info
            act = chunks.get((stage, info.chunk), 0.0)
            if t.kind == "forward":
                events.append((t.start, t.end, act))
            elif t.kind == "F&B":
                # Both halves' activations are live inside the fused pass (DualPipe's replay
                # counts the forward's before it frees the backward's).
                events.append((t.start, t.start, act))
                events.append((t.end, t.end, -chunks.get((stage, info.pair_chunk), 0.0)))
            elif t.kind == "weight-grad" or (t.kind == "backward"
                                              and any(k == "weight-grad" for k, _ in t.parts)):
                # A full backward (its parts include the weight gradients) or the weight-gradient
                # pass of a split one completes the gradients; an input-gradient pass keeps them.
                events.append((t.start, t.end, -act))
        events.sort(key=lambda e: (e[0], e[1]))
        level, points = 0.0, [(0.0, 0.0)]
        for start, end, delta in events:
            if points[-1] != (start, level):
                points.append((start, level))
            level = max(level + delta, 0.0)
            points.append((end, level))
        mem = res.memory_by_class[cls] if cls < len(res.memory_by_class) else res.memory
        name = res.classes[cls].name if cls < len(res.classes) else f"stage {stage}"
        held = [ch for ch, _ in b.rank_chunks(stage)] if stage < b.p else []
        static = mem.params + mem.grads + mem.optimizer + mem.reserved
        transient = recompute_transient(b, held) if held else 0.0
        out.append(MemoryCurve(cls, name, static, tuple(points), transient))
    return tuple(out)
