"""Which layers each pipeline chunk holds: the given ``parallelism.stage_layers``, else the split
that minimises the slowest stage's seconds per pipeline unit as the engine prices them
(split_cost.py): DualPipe's rank pairs (dualpipe_split.py), the chunks along one direction
(partition.py), or, for a workload whose stage outputs differ by boundary (a CNN) with one chunk
per stage, PipeDream's partitioner that also weighs each boundary's transfers (cut_split.py)."""
from __future__ import annotations

from dataclasses import dataclass

from ..schedules.live import live_vectors
from .cut_split import Memory, min_max_cut_split
from .dualpipe_split import pair_split
from .interleaved_pick import pick
from .layout import layout_for
from .memory_split import Live, fit_memory
from .partition import split_layers
from .split_cost import SplitCosts
from .v_split import v_split

# DualPipe's pair splits by SplitCosts.search_key (equal keys, equal splits): a simulation builds
# the scenario's builder and the bubble formula's ideal one, both on the scenario's own network
# (IterationBuilder._split), and an app or a sweep re-simulates the same shape; each search costs
# a few ms.  Bounded: emptied when full.
_PAIR_SPLITS: dict[tuple, tuple[int, ...]] = {}
_PAIR_SPLITS_MAX = 512


def split_live(schedule, p: int, m: int, v: int) -> Live:
    """Per stage (rank) the chunks it holds and the count vectors of their activations its order
    passes through (schedules/live.py): what choose_split weighs memory by (memoised: the V
    schedules reorder their orders to replay them)."""
    key = (schedule.name, p, m, v)
    got = _LIVE.get(key)
    if got is None:
        if len(_LIVE) >= _LIVE_MAX:
            _LIVE.clear()
        lay = layout_for(schedule, p, v)
        width = schedule.chunks_per_rank(v)
        got = _LIVE[key] = Live(tuple(tuple(lay.chunk_index(r, j) for j in range(width)) for r in range(p)),
                                tuple(live_vectors(schedule, r, p, m, v) for r in range(p)))
    return got


_LIVE: dict[tuple, Live] = {}
_LIVE_MAX = 4096


def given_split(par) -> tuple[int, ...] | None:
    """The layers per chunk the user fixed: ``parallelism.pipeline_layout`` (Megatron's pipeline
    layout: its first and last entries may be 0, an embedding-only or loss-only chunk, as Llama 3
    places them — Llama Team 2024, Sec. 3.3.2) or ``stage_layers``; None lets the split balance."""
    return par.pipeline_layout if par.pipeline_layout is not None else par.stage_layers


@dataclass(frozen=True)
class SplitChoice:
    """A chosen split and the time-balanced one it started from: they differ only when the
    balanced split did not fit the GPU's memory and layers were moved (memory_split.fit_memory),
    which the run then says (analysis/report.split_notice)."""

    layers: tuple[int, ...]
    balanced: tuple[int, ...]

    @property
    def moved(self) -> bool:
        """Whether layers were moved off the time-balanced split to fit memory."""
        return self.layers != self.balanced


def choose_split(given: tuple[int, ...] | None, costs: SplitCosts, chunks: int,
                 stages: int | None, units: int, v_shape: bool = False,
                 fused: bool = False, live: Live | None = None) -> tuple[int, ...]:
    """Layers per chunk: :func:`split_choice`'s ``layers``."""
    return split_choice(given, costs, chunks, stages, units, v_shape, fused, live).layers


def split_choice(given: tuple[int, ...] | None, costs: SplitCosts, chunks: int,
                 stages: int | None, units: int, v_shape: bool = False,
                 fused: bool = False, live: Live | None = None) -> SplitChoice:
    """Layers per chunk, with the time-balanced split they started from: ``given`` when set; else
    :func:`start_splits`' split, with ``live`` (split_live: what each stage holds through its order)
    moved until every stage fits where it puts more on some stage than its GPU holds
    (:func:`fit_picked`: memory_split.fit_memory, the layers moving off the stages that hold more
    micro-batches, as Llama 3 405B's stages were balanced)."""
    if given is not None:
        return _kept(tuple(given))
    picked, balanced = start_splits(costs, chunks, stages, units, v_shape, fused)
    if live is None or stages is None or chunks == 1 or costs.cuts is not None:
        return _kept(picked)
    extras = None if v_shape else costs.chunk_sends(chunks, v_shape)
    return fit_picked(costs, picked, balanced, live, extras, fused)


def start_splits(costs: SplitCosts, chunks: int, stages: int | None, units: int, v_shape: bool = False,
                 fused: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the split the memory step starts from, the forward + backward balance), before memory:
    for ``stages`` None (DualPipe, whose rank r holds chunk r and chunk chunks-1-r) the pair split
    for ``units`` pipeline units per iteration (the only split that depends on them); else the
    balanced split_layers of each layer's forward and backward seconds (split_cost.unit_seconds),
    the embedding's on the first chunk, the output layer's on the last and each chunk's blocking
    sends on it, interleaved over ``stages`` when fewer than chunks (``v_shape``: a V's chunks,
    whose sends differ) — or, interleaved with frozen layers, the forwards' balance where the
    schedule runs it better (interleaved_pick.py).  The two are equal but for that pick."""
    n = len(costs.layers)
    if stages is not None and chunks - 2 <= n < chunks:
        # Fewer layers than chunks: the embedding and then the output layer + loss take a chunk of
        # their own, as Megatron-LM's account_for_embedding_in_pipeline_split /
        # account_for_loss_in_pipeline_split place them and Llama 3 405B ran (126 layers on 16 x 8
        # virtual stages: "the first model chunk on the first stage has only the embedding, and the
        # last model chunk on the last stage has only output projection and loss", Sec. 3.3.2).
        edge = (0,) + (1,) * n + ((0,) if chunks - n == 2 else ())
        return edge, edge
    if chunks == 1:
        return (n,), (n,)
    if stages is None:
        key = costs.search_key(chunks, None, units)
        got = _PAIR_SPLITS.get(key)
        if got is None:
            if len(_PAIR_SPLITS) >= _PAIR_SPLITS_MAX:
                _PAIR_SPLITS.clear()
            got = _PAIR_SPLITS[key] = pair_split(costs, chunks, units)
        return got, got
    per, first, last = costs.unit_seconds()
    if costs.cuts is not None and stages == chunks and costs.cuts.shape[1] == chunks - 1 and not v_shape:
        memory = Memory(costs.held, costs.first_held, costs.last_held, costs.capacity)
        cut = min_max_cut_split(per, first, last, costs.cuts, chunks, memory, blocking=bool(costs.sends))
        return cut, cut
    extras = costs.chunk_sends(chunks, v_shape)
    split = v_split(costs, chunks, fused) if v_shape else \
        split_layers(per, chunks, first, last, stages=stages, extras=extras)
    if v_shape or stages >= chunks:
        return split, split
    # Frozen layers (forward only): the forwards' balance may pace the warm-up better.
    fwd, first_f, last_f = costs.forward_seconds()
    return pick(split, fwd, per, (first_f, first, last_f, last), stages, extras), split


def fit_picked(costs: SplitCosts, picked: tuple[int, ...], balanced: tuple[int, ...], live: Live,
               extras: list[float] | None, fused: bool) -> SplitChoice:
    """The memory step (memory_split.fit_memory) of :func:`start_splits`' split; the forwards'
    balance only where it fits as it is — else the forward + backward balance's memory step (a
    hunt: moved for memory, the forwards' balance ended 1.9 % slower on Llama 3 405B with 64
    micro-batches).  Returns the split and the one it started from."""
    if picked != balanced:
        if fit_memory(costs, picked, live, extras, fused) == picked:
            return _kept(picked)
    return SplitChoice(fit_memory(costs, balanced, live, extras, fused), balanced)


def _kept(split: tuple[int, ...]) -> SplitChoice:
    """A split no memory step moved."""
    return SplitChoice(split, split)
