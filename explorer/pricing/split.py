"""The builder's layer split (IterationBuilder._split) for the estimator, memoised.

The split weighs each piece — a layer of each kind, the embedding's and the output layer's extra
work — by its seconds as the passes run them (taskgraph/split_cost.py), priced on stage 0 of the
scenario's own network with no ideal aspect, whatever the row's.  Those are chunk_basis.basis's
pieces of stage 0's class: its features give the same parts, summed in the same order
(split_cost.piece_fields), so the numbers — and the split — are the builder's.  Rows whose search
reads the same numbers (SplitCosts.search_key) share one search.
"""
from __future__ import annotations

from dataclasses import replace
from typing import cast

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..network.groups import Network
from ..schedules.registry import get as get_schedule
from ..taskgraph.layout import layout_for
from ..taskgraph.split import SplitChoice, fit_picked, given_split, split_live, start_splits
from ..taskgraph.split_cost import (
    Piece,
    SplitCosts,
    assemble,
    held_arrays,
    held_scalars,
    layer_pieces,
    piece_fields,
)
from .chunk_basis import F_IDX, KINDS, PARTS, ROLES, basis, basis_key, costs
from .keys import intern, memo_table, network_key
from .stages import shared_netinfo, stage_classes

_SPLITS = memo_table()
_COSTS = memo_table()
_SEARCHES: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = memo_table()
_PIECES = memo_table()
_FITTED: dict[tuple, SplitChoice] = memo_table()
_HELD = memo_table()
_LIVES = memo_table()


def layer_split(sc: Scenario, ckey: int, pair_split: bool, bkey: int | None = None) -> tuple[int, ...]:
    """Layers per chunk, as IterationBuilder._split chooses them (memoised).  ``bkey``: stage 0's
    basis key without ideal aspects on the scenario's own network, when the caller has it
    (profile._layout_of for a row without ideal aspects)."""
    return layer_split_choice(sc, ckey, pair_split, bkey).layers


def layer_split_choice(sc: Scenario, ckey: int, pair_split: bool, bkey: int | None = None) -> SplitChoice:
    """:func:`layer_split` with the time-balanced split it was moved from to fit memory (equal when
    none was moved), as IterationBuilder._split records it."""
    par = sc.parallelism
    given = given_split(par)
    if given is not None:
        return SplitChoice(tuple(given), tuple(given))
    nkey = network_key(sc, False) if bkey is None or _reads_network(sc, pair_split) else None
    if bkey is None:
        bkey = _stage0_key(sc, ckey, nkey)
    units = sc.micro_batches * par.token_slices if pair_split else 0    # DualPipe's split reads them
    lay = layout_for(get_schedule(par.schedule), par.pp, par.vpp)
    fused = lay.v_shape and get_schedule(par.schedule).fused_pairs      # DualPipeV: F&B-weighed layers
    key = (bkey, par.pp, par.vpp, pair_split, lay.v_shape, fused, units, _assembly_key(sc, pair_split, nkey))
    chunks = lay.length              # as IterationBuilder._split: a V's 2p chunks each on its own
    stages = None if pair_split else chunks if lay.v_shape else par.pp
    got = _SPLITS.get(key)
    if got is None:
        c = _costs(sc, ckey, bkey, key[-1], nkey)
        skey = c.search_key(chunks, stages, units, lay.v_shape, fused)
        starts = _SEARCHES.get(skey)
        if starts is None:
            starts = _SEARCHES[skey] = start_splits(c, chunks, stages, units, lay.v_shape, fused)
        got = _SPLITS[key] = (starts, c, intern(("search", skey)))
    (out, bal), c, sid = got
    if stages is None or chunks == 1 or c.cuts is not None:
        return SplitChoice(out, out)
    return _fitted(sc, out, bal, c, sid, chunks, stages, lay.v_shape, fused, nkey, ckey, bkey)


def _fitted(sc: Scenario, out: tuple[int, ...], bal: tuple[int, ...], c: SplitCosts, sid: int, chunks: int,
            stages: int, v_shape: bool, fused: bool, nkey: int | None, ckey: int, bkey: int) -> SplitChoice:
    """split_choice's memory step (taskgraph/split.fit_picked) on this row's own bytes: the cached
    costs are shared by rows whose seconds are equal, not their ZeRO sharding or GPU (memoised on
    the split's search key ``sid``, the in-flight counts and the bytes).  A row prices only the
    few numbers its bytes are made of (split_cost.held_scalars); rows that agree on them and on
    the pieces share the bytes' arrays and their key."""
    par = sc.parallelism
    sched = get_schedule(par.schedule)
    layers, first, last = _pieces(sc, ckey, bkey, nkey)
    # held_scalars reads the network's group sizes only, which RowNetwork.group_size takes from
    # the network key whichever row's scenario it holds: the shared one does (no row copy).
    info = shared_netinfo(sc, False, network_key(sc, False) if nkey is None else nkey)
    scalars = held_scalars(sc, cast(Network, info.net), layers, first, last)
    held = _HELD.get((bkey, scalars))
    if held is None:
        arrays = held_arrays(layers, first, last, scalars)
        bytes_key = ("held", *(a.tobytes() for a in arrays[:3]), arrays[3])
        held = _HELD[(bkey, scalars)] = (arrays, intern(bytes_key))
    arrays, hid = held
    lkey = (sched.name, par.pp, sc.micro_batches * par.token_slices, par.vpp)
    live = _LIVES.get(lkey)
    if live is None:
        got_live = split_live(sched, *lkey[1:])
        live = _LIVES[lkey] = (got_live, intern(("live", got_live)))
    key = (sid, live[1], hid)
    got = _FITTED.get(key)
    if got is None:
        row = replace(c, held=arrays[0], first_held=arrays[1], last_held=arrays[2], capacity=arrays[3])
        extras = None if v_shape else c.chunk_sends(chunks, v_shape)
        got = _FITTED[key] = fit_picked(row, out, bal, live[0], extras, fused)
    return got


def _reads_network(sc: Scenario, pair_split: bool) -> bool:
    """Whether split_cost.assemble reads more of the network than stage 0's pieces: every stage
    pair's blocking sends, or (DualPipe's pair split, which weighs memory) the data-parallel groups."""
    return pair_split or (sc.parallelism.pp > 1 and framework_profile(sc.training.framework).blocking_p2p)


def _assembly_key(sc: Scenario, pair_split: bool, nkey: int | None) -> tuple:
    """What split_cost.assemble reads beyond the pieces (whose basis key holds the compute key:
    the model, GPU, framework, micro-batch and all pp_message_bytes reads): the SM share, and
    where it reads them the network (sends, groups) and ZeRO's options."""
    com = sc.communication
    if not _reads_network(sc, pair_split):
        return (com.comm_sms,)
    return (com.comm_sms, nkey, sc.parallelism.zero, sc.training.optimizer, com.compression.kind)


def _stage0_key(sc: Scenario, ckey: int, nkey: int | None) -> int:
    """Stage 0's basis key without ideal aspects on the scenario's own network."""
    par = sc.parallelism
    info = shared_netinfo(sc, False, network_key(sc, False) if nkey is None else nkey)
    _, cls, _, netsigs = stage_classes(info, par.zero == 3)
    return basis_key(sc, ckey, netsigs[int(cls[0])], frozenset(), _tied(sc))


def _tied(sc: Scenario) -> bool:
    par = sc.parallelism
    lay = layout_for(get_schedule(par.schedule), par.pp, par.vpp)
    return sc.model.tied_embeddings and lay.ends_on_one_rank


def _costs(sc: Scenario, ckey: int, bkey: int, akey: tuple, nkey: int | None) -> SplitCosts:
    """split_cost.split_costs of ``sc`` from basis's pieces of stage 0 (memoised on their key and
    what assemble reads besides)."""
    got = _COSTS.get((bkey, akey))
    if got is None:
        info = shared_netinfo(sc, False, network_key(sc, False) if nkey is None else nkey)
        layers, first, last = _pieces(sc, ckey, bkey, nkey)
        transient = max(lc.recompute_bytes for lc in costs(sc, ckey).spec.kinds)
        # RowNetwork stands in for Network with the same pricing methods (pricing/keys.py).
        got = _COSTS[(bkey, akey)] = assemble(sc, info.for_row(sc), layers, first, last,  # type: ignore[arg-type]
                                              transient=transient)
    return got


def _pieces(sc: Scenario, ckey: int, bkey: int, nkey: int | None) -> tuple[list[Piece], Piece, Piece]:
    """Per layer, first end and last end the pieces of stage 0's basis (memoised on its key)."""
    got = _PIECES.get(bkey)
    if got is None:
        info = shared_netinfo(sc, False, network_key(sc, False) if nkey is None else nkey)
        rows, _ = basis(sc, ckey, info.for_row(sc), 0, frozenset(), _tied(sc), bkey)
        pieces = [_piece(row) for row in rows]
        # A layer of a kind beyond the estimator's two (registry ``estimator`` False: rows the
        # simulation prices) reads the second kind's piece, which no estimate then uses.
        layers = layer_pieces([pieces[min(k, KINDS - 1)] for k in costs(sc, ckey).spec.kind_of_layers()])
        got = _PIECES[bkey] = (layers, pieces[ROLES.index("first")], pieces[ROLES.index("last")])
    return got


def _piece(row) -> Piece:
    """A basis row as split_cost.piece_of reads the chunk it came from."""
    fwd = {k: float(row[F_IDX[f"fwd.{k}"]]) for k in PARTS}
    bwd = {k: float(row[F_IDX[f"bwd.{k}"]]) for k in PARTS}
    fields = piece_fields(fwd, bwd, float(row[F_IDX["hidden_f"]]) + float(row[F_IDX["fsdp_hidden_f"]]),
                          float(row[F_IDX["hidden_b"]]) + float(row[F_IDX["fsdp_hidden_b"]]))
    return Piece(fields, float(row[F_IDX["params"]]), float(row[F_IDX["expert_params"]]),
                 float(row[F_IDX["act_bytes"]]), float(row[F_IDX["fp8_params"]]),
                 float(row[F_IDX["fp8_gemms"]]))
