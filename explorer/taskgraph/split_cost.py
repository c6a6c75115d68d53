"""What the layer split minimises: each stage's seconds per pipeline unit, as the engine adds them up.

The split used to weigh a layer by its kernels' time alone (forward + backward + weight gradients)
and the last chunk by the output layer alone.  The engine runs more than that: a pass lasts the sum
of its parts — compute, recompute, weight gradients *and* the exposed TP/CP/EP/ZeRO-3
communication — plus the SM contention of the communication hidden under it
(builder._pass_shape; DeepSeek-V3 report Sec. 3.2.2), and the last chunk also runs the
multi-token-prediction block (chunks.chunk_work).  An MoE layer's all-to-all is a large share of
its time (DeepSeek-V3, EP 64 across nodes: about 43 % at top-8), so a split on kernel time alone
crowds MoE layers onto some stages.

Each piece — one layer of each kind, the embedding's and the output layer's extra work on the
first and last chunk — is priced by chunk_work itself (a middle chunk of one layer, an end chunk of
no layer; chunk figures are sums over these pieces: pricing/chunk_basis.py) and kept as
:data:`FIELDS`, from which :func:`unit_seconds` (a chunk's forward and backward passes, one pipeline
direction) and :func:`fused_seconds` (DualPipe's F&B pair, chunks.fuse) follow.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..network.compression import EF_BYTES
from ..network.groups import Network
from ..physics.hardware import ComputeModel
from ..workloads.spec import WorkloadSpec
from .chunks import ChunkContext, ChunkWork, chunk_work
from .cut_split import cut_seconds
from .layer import pp_message_bytes
from .techniques.dp_contention import sm_factor
from .techniques.fp8_memory import fp8_memory_bytes
from .techniques.fsdp import fsdp_step_sync
from .techniques.nccl_buffers import nccl_reserved_bytes
from .techniques.optimizer import grad_buffer_bytes, grad_reduce_bytes, optimizer_state_bytes, param_bytes

# Seconds per pipeline unit of a piece: the forward's compute (compute, recompute), its exposed
# communication and the communication hidden under it (TP overlap, ring attention, FSDP
# prefetch); the same for the full backward (weight gradients included), and of that backward
# compute the weight gradients (a split backward's W pass).
FIELDS = ("compute_f", "comm_f", "hidden_f", "compute_b", "comm_b", "hidden_b", "wgrad_b")


@dataclass(frozen=True)
class SplitCosts:
    """Per layer (in model order) and per end, the :data:`FIELDS` the split weighs, and the share
    of a pass's speed lost per second of communication hidden under it (dp_contention.sm_factor)."""

    layers: np.ndarray               # (layers, FIELDS)
    first: np.ndarray                # (FIELDS,) the embedding's work on the first chunk
    last: np.ndarray                 # (FIELDS,) the output layer, loss and MTP blocks on the last chunk
    sm: float
    # Per stage pair (s, s+1; pair p-1 wraps to stage 0, network.members): seconds of one pipeline
    # transfer where it blocks the sender's compute stream (DeepSpeed's PipelineEngine,
    # frameworks.py), else empty: per unit, a stage's time whatever its layers.
    sends: tuple[float, ...] = ()
    # Per layer, first end, last end: the bytes a GPU holds for the piece (weights, gradients and
    # optimizer state as the ZeRO stage shards them) and its activations per unit in flight.
    held: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    first_held: np.ndarray = field(default_factory=lambda: np.zeros(2))
    last_held: np.ndarray = field(default_factory=lambda: np.zeros(2))
    capacity: float = float("inf")   # bytes of the GPU (GPU.capacity_bytes)
    transient: float = 0.0           # bytes one recomputed layer holds again (the larger kind's)
    # (layers - 1, pp - 1) seconds of the transfers a boundary after layer i costs on pair q, when
    # the workload's stage outputs differ by boundary (cut_split.py: a CNN); None otherwise.
    cuts: np.ndarray | None = None

    def key(self) -> tuple:
        """A hashable summary (equal costs, equal split): the distinct layer rows in order."""
        rows = self.layers
        change = np.flatnonzero(np.any(rows[1:] != rows[:-1], axis=1)) + 1
        starts = np.concatenate(([0], change))
        runs = tuple((int(s), tuple(rows[s].tolist())) for s in starts)
        held = self.held
        change = np.flatnonzero(np.any(held[1:] != held[:-1], axis=1)) + 1
        held_runs = tuple((int(k), tuple(held[k].tolist())) for k in np.concatenate(([0], change)))
        return (len(rows), runs, tuple(self.first.tolist()), tuple(self.last.tolist()), self.sm, self.sends,
                held_runs, tuple(self.first_held.tolist()), tuple(self.last_held.tolist()), self.capacity,
                self.transient, None if self.cuts is None else self.cuts.tobytes())

    def search_key(self, chunks: int, stages: int | None, units: int, v_shape: bool = False,
                   fused: bool = False) -> tuple:
        """What the split's search reads, hashable (equal keys, equal splits): along one direction
        each layer's, each end's and each chunk's seconds (partition.split_layers); DualPipe's
        search every field, the bytes and the unit count."""
        if stages is not None:
            per, first, last = self.unit_seconds()
            sends = tuple(self.chunk_sends(chunks, v_shape) or ())
            # An interleaved line also reads the forwards (interleaved_pick.py).
            fwd = self.forward_seconds() if stages < chunks and not v_shape else None
            fwd_key = None if fwd is None else (tuple(fwd[0]), fwd[1], fwd[2])
            return ("line", tuple(per), first, last, sends, chunks, stages, v_shape, fused,
                    None if self.cuts is None else self.cuts.tobytes(), fwd_key)
        return ("pairs", self.key(), chunks, units)

    def chunk_sends(self, chunks: int, v_shape: bool = False) -> list[float] | None:
        """One direction: per chunk gc, its blocking sends per unit — the activation to chunk gc+1
        on pair gc mod p, the gradient to chunk gc-1 on pair (gc-1) mod p (layout.Layout.pair) —
        or None when sends do not block.  ``v_shape``: chunk gc on rank min(gc, 2p-1-gc), each send
        on the pair of the lower rank, none at the turn (both chunks on rank p-1)."""
        s = self.sends
        if not s:
            return None
        p = len(s)
        if v_shape:
            rank = [min(gc, 2 * p - 1 - gc) for gc in range(chunks)]

            def send(a: int, b: int) -> float:
                return 0.0 if not 0 <= b < chunks or rank[a] == rank[b] else s[min(rank[a], rank[b])]

            return [send(gc, gc + 1) + send(gc, gc - 1) for gc in range(chunks)]
        return [(s[gc % p] if gc < chunks - 1 else 0.0) + (s[(gc - 1) % p] if gc > 0 else 0.0)
                for gc in range(chunks)]

    def rank_sends(self) -> np.ndarray:
        """DualPipe: (p, 2 directions, 2) per rank the blocking send after a forward and after a
        backward of each direction.  Direction 0 sends forward on pair r and back on pair r-1;
        direction 1 runs the other way, forward on pair r-1 and back on pair r (the pair of the
        lower rank, layout.Layout.pair); the edge ranks have no neighbour on one side."""
        p = len(self.sends)
        out = np.zeros((p, 2, 2))
        for r in range(p):
            up = self.sends[r] if r < p - 1 else 0.0
            down = self.sends[r - 1] if r > 0 else 0.0
            out[r] = ((up, down), (down, up))
        return out

    def forward_seconds(self) -> tuple[list[float], float, float]:
        """Per layer, first end, last end: the forward pass's share of :meth:`unit_seconds`."""
        per, sm = forward_seconds(self.layers, self.sm), self.sm
        return per.tolist(), float(forward_seconds(self.first, sm)), float(forward_seconds(self.last, sm))

    def unit_seconds(self) -> tuple[list[float], float, float]:
        """Per layer, first end, last end: the seconds a chunk's forward and backward passes take
        for one unit on one pipeline direction (builder._pass_shape: parts + hidden x sm)."""
        per = unit_seconds(self.layers, self.sm)
        return per.tolist(), float(unit_seconds(self.first, self.sm)), float(unit_seconds(self.last, self.sm))


def unit_seconds(v: np.ndarray, sm: float) -> np.ndarray:
    """Forward + backward seconds of pieces ``v`` (..., FIELDS), each pass its parts plus the SM
    contention of what it hides (builder._pass_shape, _sm_contention)."""
    return v[..., 0] + v[..., 1] + v[..., 3] + v[..., 4] + sm * (v[..., 2] + v[..., 5])


def forward_seconds(v: np.ndarray, sm: float) -> np.ndarray:
    """Forward seconds of pieces ``v`` (..., FIELDS): unit_seconds' forward terms."""
    return v[..., 0] + v[..., 1] + sm * v[..., 2]


def fused_seconds(f: np.ndarray, b: np.ndarray, sm: float) -> np.ndarray:
    """DualPipe's F&B of the forward of chunk ``f`` and the backward of chunk ``b`` (..., FIELDS):
    the pair takes its compute or its communication time, whichever is longer (chunks.fuse,
    DeepSeek-V3 report Fig. 4), plus the SM contention of the communication it hides, the shorter
    of the two and what each pass hides anyway (builder._fused_task)."""
    comp = f[..., 0] + b[..., 3]
    comm = f[..., 1] + b[..., 4]
    return np.maximum(comp, comm) + sm * (np.minimum(comp, comm) + f[..., 2] + b[..., 5])


# The parts a pass adds up, in the order the split sums them (pricing/split.py sums the same
# parts of chunk_basis's features in this order: equal floats, equal splits).
COMPUTE_ORDER = ("compute", "recompute", "weight-grad")
COMM_ORDER = ("tp", "cp", "ep", "dp")


@dataclass(frozen=True)
class Piece:
    """One piece as the split reads it: its :data:`FIELDS`, dense and expert parameters and
    activation bytes per unit."""

    fields: np.ndarray
    params: float
    expert_params: float
    act_bytes: float
    fp8_params: float = 0.0          # ChunkWork.fp8_params / fp8_gemms (techniques/fp8_memory.py)
    fp8_gemms: float = 0.0


def piece_fields(fwd: dict[str, float], bwd: dict[str, float], hidden_f: float,
                 hidden_b: float) -> np.ndarray:
    """:data:`FIELDS` from a pass's parts (category -> seconds) and the seconds hidden under each."""
    return np.array([sum(fwd.get(k, 0.0) for k in COMPUTE_ORDER), sum(fwd.get(k, 0.0) for k in COMM_ORDER),
                     hidden_f, sum(bwd.get(k, 0.0) for k in COMPUTE_ORDER),
                     sum(bwd.get(k, 0.0) for k in COMM_ORDER), hidden_b, bwd.get("weight-grad", 0.0)])


def piece_of(ch: ChunkWork) -> Piece:
    """A priced chunk (or piece) as the split reads it."""
    hidden_f = sum(v for _, v in ch.hidden_f) + ch.fsdp_hidden[0]
    hidden_b = sum(v for _, v in ch.hidden_b) + ch.fsdp_hidden[1]
    fields = piece_fields(dict(ch.fwd_parts), dict(ch.bwd_parts), hidden_f, hidden_b)
    return Piece(fields, ch.params, ch.expert_params, ch.act_bytes, ch.fp8_params, ch.fp8_gemms)


def fields_of(ch: ChunkWork) -> np.ndarray:
    """:data:`FIELDS` of a priced chunk (or piece)."""
    return piece_of(ch).fields


def split_costs(sc: Scenario, net: Network, cm: ComputeModel, spec: WorkloadSpec, tied: bool) -> SplitCosts:
    """The pieces of ``sc`` priced on stage 0 of ``net`` (a network with priced communication: the
    split is the scenario's, whichever ideal-pipeline aspects a run then applies), each layer kind
    and each end once, at the first layer of that kind: the calls chunk_basis.basis makes."""
    ctx = ChunkContext(sc, net, cm, frozenset(), spec, 3, tied)
    ends = piece_of(chunk_work(ctx, 0, 0, 0, 0)), piece_of(chunk_work(ctx, 2, 0, 0, 0))
    pieces = {}
    for kind in dict.fromkeys(k for k, _ in spec.runs):
        at = spec.first_layer_of(kind)
        assert at is not None                     # a kind of spec.runs has a first layer
        pieces[kind] = piece_of(chunk_work(ctx, 1, 0, at, 1))
    got = assemble(sc, net, [pieces[k] for k in spec.kind_of_layers()], *ends,
                   transient=max(lc.recompute_bytes for lc in spec.kinds))
    cuts = cut_seconds(sc, net, spec)
    return got if cuts is None else replace(got, cuts=cuts)


def assemble(sc: Scenario, net: Network, layers: list[Piece], first: Piece, last: Piece,
             transient: float) -> SplitCosts:
    """SplitCosts of the pieces: their fields, the bytes each holds (:func:`held_fields`), the
    blocking sends on every stage pair (as builder._transfer_shape prices them), the GPU's memory
    and ``transient``, the bytes one recomputed layer of the largest kind holds again
    (analysis/memory.recompute_transient: an upper bound for every GPU)."""
    par = sc.parallelism
    sends: tuple[float, ...] = ()
    if par.pp > 1 and framework_profile(sc.training.framework).blocking_p2p:
        msg = pp_message_bytes(sc)
        sends = tuple(net.cost("send-recv", msg, "pp", s).time_s for s in range(par.pp))
    held, first_held, last_held, capacity = held_fields(sc, net, layers, first, last)
    distinct, index = distinct_pieces(layers)         # each distinct piece's row, repeated
    return SplitCosts(np.stack([pc.fields for pc in distinct])[index], first.fields, last.fields,
                      sm_factor(sc, False), sends, held, first_held, last_held, capacity, transient)


def held_fields(sc: Scenario, net: Network, layers: list[Piece], first: Piece,
                last: Piece) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per layer (layers, 2), first end and last end the bytes a GPU holds for the piece (weights,
    gradients and optimizer state per held_bytes_per_param, an FP8 run's weight copies and scaling
    state) and its activations per unit in flight; and the GPU's bytes less NCCL's buffers.
    Priced once per distinct piece (a model's layers share a few)."""
    return held_arrays(layers, first, last, held_scalars(sc, net, layers, first, last))


def held_scalars(sc: Scenario, net: Network, layers: list[Piece], first: Piece,
                 last: Piece) -> tuple[float, float, tuple[float, ...], float]:
    """All :func:`held_fields` reads of the row besides the pieces (equal scalars on the same
    pieces, equal bytes): the bytes per dense and per expert parameter, each distinct piece's,
    the first end's and the last end's FP8 bytes (an FP8 run's weight copies and scaling state;
    none of ZeRO-3's gathered copies: like its gathered working set, they are not a piece's,
    techniques/fp8_memory.py), and the GPU's bytes less NCCL's buffers."""
    dense_b, expert_b = held_bytes_per_param(sc, net)
    distinct, _ = distinct_pieces(layers)
    # One data-parallel rank gathers nothing: its FP8 copies are whole (analysis/memory.py).
    sharded = net.group_size("dp", 0) > 1 or (sc.model.is_moe and net.group_size("edp", 0) > 1)
    fp8 = tuple(float(fp8_memory_bytes(sc, pc.fp8_params, pc.fp8_gemms, 0.0, sharded))
                for pc in (*distinct, first, last))
    return dense_b, expert_b, fp8, sc.hardware.gpu.capacity_bytes - nccl_reserved_bytes(sc)


def held_arrays(layers: list[Piece], first: Piece, last: Piece,
                scalars: tuple[float, float, tuple[float, ...], float]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """:func:`held_fields` from :func:`held_scalars`."""
    dense_b, expert_b, fp8, capacity = scalars

    def held(pc: Piece, fp8: float) -> np.ndarray:
        return np.array([pc.params * dense_b + pc.expert_params * expert_b + fp8, pc.act_bytes])

    distinct, index = distinct_pieces(layers)
    return (np.stack([held(pc, f) for pc, f in zip(distinct, fp8[:-2], strict=True)])[index],
            held(first, fp8[-2]), held(last, fp8[-1]), capacity)


def distinct_pieces(layers: Sequence[Piece]) -> tuple[list[Piece], np.ndarray]:
    """The distinct pieces of ``layers`` (by identity: a model's layers share a few) and, per
    layer, the index of its piece among them."""
    if isinstance(layers, _Layers):
        return layers.distinct, layers.positions
    seen: dict[int, int] = {}
    distinct: list[Piece] = []
    index = []
    for pc in layers:
        k = seen.get(id(pc))
        if k is None:
            k = seen[id(pc)] = len(distinct)
            distinct.append(pc)
        index.append(k)
    return distinct, np.array(index, dtype=np.int64)


class _Layers(list):
    """A list of per-layer pieces that knows its distinct pieces (:func:`layer_pieces`)."""

    distinct: list[Piece]
    positions: np.ndarray


def layer_pieces(layers: Sequence[Piece]) -> list[Piece]:
    """``layers`` as a list that carries :func:`distinct_pieces` computed once (the estimator
    keeps one per pricing and prices each row's bytes from it)."""
    out = _Layers(layers)
    out.distinct, out.positions = distinct_pieces(layers)
    return out


def held_bytes_per_param(sc: Scenario, net: Network) -> tuple[float, float]:
    """Bytes a GPU holds per dense and per expert parameter of its chunks: the bf16 weights,
    gradients and optimizer state, each divided over the data-parallel (expert data-parallel)
    group from the ZeRO stage that shards it (Rajbhandari et al., ZeRO, SC20, Fig. 1), and a
    compressed gradient's error-feedback residual — analysis/memory.class_memory per parameter,
    with one weight version (DualPipe, the one split that weighs memory) and stage 0's groups."""
    zero = sc.parallelism.zero
    opt = optimizer_state_bytes(sc)
    weight = param_bytes(sc)
    residual = EF_BYTES[sc.communication.compression.kind]
    # FSDP2 under a pipeline keeps every parameter gathered and its accumulated gradient unsharded
    # in the reduce dtype (techniques/fsdp.zero3_working_set), on top of ZeRO-3's shards.
    nd = net.group_size("dp", 0)
    ne = net.group_size("edp", 0) if sc.model.is_moe else 1
    # One rank holds whole parameters and gathers nothing (analysis/memory.class_memory).
    gathered = weight + grad_reduce_bytes(sc) if fsdp_step_sync(sc) and (nd > 1 or ne > 1) else 0.0
    grads = grad_buffer_bytes(sc)          # fp32 under Megatron's main_grad (config/frameworks.py)

    def per(n: int) -> float:
        return (weight / (n if zero >= 3 else 1) + grads / (n if zero >= 2 else 1)
                + opt / (n if zero >= 1 else 1) + (residual if n > 1 else 0.0) + gathered)

    return per(nd), per(ne)
