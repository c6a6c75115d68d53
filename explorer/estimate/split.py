"""The builder's layer split (IterationBuilder._split) for the estimator, memoised.

The split weighs each piece — a layer of each kind, the embedding's and the output layer's extra
work — by its seconds as the passes run them (taskgraph/split_cost.py), priced by chunk_work on
stage 0 of the scenario's own network with no ideal aspect, whatever the row's: so rows that agree
on stage 0's pricing key (chunk_basis.basis_key) and the SM share of hidden communication price the
pieces once, and rows whose pieces come out equal (any pricing key) search the split once.
"""
from __future__ import annotations

from ..frameworks import profile as framework_profile
from ..scenario import Scenario
from ..schedules.registry import get as get_schedule
from ..taskgraph.split import choose_split
from ..taskgraph.split_cost import SplitCosts, split_costs
from .chunk_basis import basis_key, costs
from .keys import memo_table, network_key
from .stages import shared_netinfo, stage_classes

_SPLITS = memo_table()
_COSTS = memo_table()
_BY_VALUES: dict[tuple, tuple[int, ...]] = memo_table()


def layer_split(sc: Scenario, ckey: int, two_directions: bool) -> tuple[int, ...]:
    """Layers per chunk, as IterationBuilder._split chooses them (memoised)."""
    par, com = sc.parallelism, sc.communication
    if par.stage_layers is not None:
        return tuple(par.stage_layers)
    nkey = network_key(sc, False)
    # What the pieces read beyond the compute and network keys (basis_key's options, sm_factor's
    # comm_sms; the compute key holds the framework and all pp_message_bytes reads) and the split's
    # own shape.
    units = sc.micro_batches * par.token_slices if two_directions else 0    # DualPipe's split reads them
    key = (ckey, nkey, par.pp, par.vpp, two_directions, par.zero == 3, com.tp_overlap, com.prefetch_layers,
           com.dp_overlap, com.comm_sms, units)
    out = _SPLITS.get(key)
    if out is None:
        c = split_pieces(sc, ckey, nkey)
        chunks = par.pp * par.vpp
        stages = None if two_directions else par.pp
        vkey = (c.key(), chunks, stages, units)
        out = _BY_VALUES.get(vkey)
        if out is None:
            out = _BY_VALUES[vkey] = choose_split(None, c, chunks, stages, units)
        _SPLITS[key] = out
    return out


def split_pieces(sc: Scenario, ckey: int, nkey: int) -> SplitCosts:
    """taskgraph.split_cost.split_costs of ``sc`` on its own network (memoised on stage 0's basis
    key and the SM share)."""
    info = shared_netinfo(sc, False, nkey)
    _, cls, _, netsigs = stage_classes(info, sc.parallelism.zero == 3)
    par = sc.parallelism
    tied = sc.model.tied_embeddings and (par.pp == 1 or get_schedule(par.schedule).two_directions)
    bkey = (basis_key(sc, ckey, netsigs[int(cls[0])], frozenset(), tied), sc.communication.comm_sms)
    # Blocking sends read every stage pair's pricing (the network key), not only stage 0's; the
    # bytes held read the data-parallel groups and ZeRO's options (held_bytes_per_param).
    blocking = par.pp > 1 and framework_profile(sc.training.framework).blocking_p2p
    net = info.net
    key = (bkey, nkey if blocking else None, par.pp, par.zero, sc.training.optimizer,
           sc.communication.compression.kind, net.group_size("dp"), net.group_size("edp"))
    got = _COSTS.get(key)
    if got is None:
        c = costs(sc, ckey)
        got = _COSTS[key] = split_costs(sc, info.for_row(sc), c.cm, c.dense, c.moe, c.emb, c.logits,  # type: ignore[arg-type]
                                        tied)
    return got
