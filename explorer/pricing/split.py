"""The builder's layer split (IterationBuilder._split) for the estimator, memoised.

The split weighs each piece — a layer of each kind, the embedding's and the output layer's extra
work — by its seconds as the passes run them (taskgraph/split_cost.py), priced on stage 0 of the
scenario's own network with no ideal aspect, whatever the row's.  Those are chunk_basis.basis's
pieces of stage 0's class: its features give the same parts, summed in the same order
(split_cost.piece_fields), so the numbers — and the split — are the builder's.  Rows whose search
reads the same numbers (SplitCosts.search_key) share one search.
"""
from __future__ import annotations

from ..config import Scenario
from ..config.frameworks import profile as framework_profile
from ..schedules.registry import get as get_schedule
from ..taskgraph.layout import layout_for
from ..taskgraph.split import choose_split, given_split
from ..taskgraph.split_cost import Piece, SplitCosts, assemble, piece_fields
from .chunk_basis import F_IDX, KINDS, PARTS, ROLES, basis, basis_key, costs
from .keys import memo_table, network_key
from .stages import shared_netinfo, stage_classes

_SPLITS = memo_table()
_COSTS = memo_table()
_SEARCHES: dict[tuple, tuple[int, ...]] = memo_table()


def layer_split(sc: Scenario, ckey: int, pair_split: bool, bkey: int | None = None) -> tuple[int, ...]:
    """Layers per chunk, as IterationBuilder._split chooses them (memoised).  ``bkey``: stage 0's
    basis key without ideal aspects on the scenario's own network, when the caller has it
    (profile._layout_of for a row without ideal aspects)."""
    par = sc.parallelism
    given = given_split(par)
    if given is not None:
        return tuple(given)
    nkey = network_key(sc, False) if bkey is None or _reads_network(sc, pair_split) else None
    if bkey is None:
        bkey = _stage0_key(sc, ckey, nkey)
    units = sc.micro_batches * par.token_slices if pair_split else 0    # DualPipe's split reads them
    lay = layout_for(get_schedule(par.schedule), par.pp, par.vpp)
    fused = lay.v_shape and get_schedule(par.schedule).fused_pairs      # DualPipeV: F&B-weighed layers
    key = (bkey, par.pp, par.vpp, pair_split, lay.v_shape, fused, units, _assembly_key(sc, pair_split, nkey))
    out = _SPLITS.get(key)
    if out is None:
        c = _costs(sc, ckey, bkey, key[-1], nkey)
        chunks = lay.length          # as IterationBuilder._split: a V's 2p chunks each on its own
        stages = None if pair_split else chunks if lay.v_shape else par.pp
        skey = c.search_key(chunks, stages, units, lay.v_shape, fused)
        out = _SEARCHES.get(skey)
        if out is None:
            out = _SEARCHES[skey] = choose_split(None, c, chunks, stages, units, lay.v_shape, fused)
        _SPLITS[key] = out
    return out


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
        rows, _ = basis(sc, ckey, info.for_row(sc), 0, frozenset(), _tied(sc), bkey)
        pieces = [_piece(row) for row in rows]
        spec = costs(sc, ckey).spec
        # A layer of a kind beyond the estimator's two (registry ``estimator`` False: rows the
        # simulation prices) reads the second kind's piece, which no estimate then uses.
        layers = [pieces[min(k, KINDS - 1)] for k in spec.kind_of_layers()]
        # RowNetwork stands in for Network with the same pricing methods (pricing/keys.py).
        got = _COSTS[(bkey, akey)] = assemble(sc, info.for_row(sc), layers,  # type: ignore[arg-type]
                                              pieces[ROLES.index("first")], pieces[ROLES.index("last")],
                                              transient=max(lc.recompute_bytes for lc in spec.kinds))
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
