"""What each cost depends on, as small hashable keys, and the network shared by the rows that agree on it.

The estimator prices a configuration from the same functions as the engine, but only once per
distinct input: a workload's description of its layers (explorer/workloads/registry.workload_spec)
reads the model, the training options other than the global batch and the optimizer, the GPU, and
the tp, cp, ep, sequence-parallel and token-slice degrees — not pp, dp, vpp, the schedule, ZeRO or
the network; a collective's cost (explorer/network/collectives.py via explorer/network/groups.py)
reads the cluster, the rank placement and the library options, not the model.
:func:`compute_key` and :func:`network_key` name exactly those inputs, so that a sweep over the NIC
bandwidth re-prices only the calls, and a sweep over pp re-prices nothing of a layer.

Keys are interned to integers (:func:`intern`), and the big frozen sections (model, GPU, cluster)
to integers by identity first (:func:`object_id`): hashing a nested dataclass walks all its fields,
while rows derived from one base by ``dataclasses.replace`` share the sections they do not change.
"""
from __future__ import annotations

from typing import Any

from ..config import Scenario
from ..network.groups import Network, pipeline_wraps

# The dimensions whose group a pass's own collectives use (layer_parts, fsdp_cost); their shapes
# on a stage decide whether two stages price a layer alike.
PASS_DIMS = ("tp", "cp", "ep", "dp", "edp")
_MAX = 100_000                 # entries of a memo table before it is cleared (long sessions)

_OBJECTS: dict[Any, int] = {}
_BY_IDENTITY: dict[int, tuple[Any, int]] = {}
_KEYS: dict[tuple, int] = {}
_TABLES: list[dict] = []


def memo_table() -> dict:
    """A memo dictionary keyed by interned integers: emptied with the interning tables."""
    table: dict = {}
    _TABLES.append(table)
    return table


def clear() -> None:
    """Forget every interned key and every memoised piece (their integers would be reused)."""
    tables: list[dict[Any, Any]] = [_OBJECTS, _BY_IDENTITY, _KEYS, *_TABLES]
    for t in tables:
        t.clear()


# Rows between two looks at the tables' sizes: a row adds a few entries to a table at most, so a
# table passes _MAX by a few hundred at most, and a row no longer pays for a look at every table
# (some 5 us, a twentieth of a memoised row).
_CHECK_EVERY = 64
_rows = [0]


def bound_memory() -> None:
    """Between rows: start afresh when a long session has filled the tables (looked at every
    _CHECK_EVERY rows)."""
    _rows[0] += 1
    if _rows[0] < _CHECK_EVERY:
        return
    _rows[0] = 0
    if len(_OBJECTS) >= _MAX or len(_BY_IDENTITY) >= _MAX or len(_KEYS) >= _MAX or \
            any(len(t) >= _MAX for t in _TABLES):
        clear()


def object_id(obj: Any) -> int:
    """A small integer equal for equal objects (by identity first, then by value)."""
    hit = _BY_IDENTITY.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    i = _OBJECTS.setdefault(obj, len(_OBJECTS))
    _BY_IDENTITY[id(obj)] = (obj, i)          # holds the object, so its id is not reused meanwhile
    return i


def intern(key: tuple) -> int:
    """A small integer for ``key`` (equal keys, equal integers)."""
    return _KEYS.setdefault(key, len(_KEYS))


def compute_key(sc: Scenario) -> int:
    """Everything a workload's spec (explorer/workloads/registry.workload_spec: a family's layer and
    edge costs) and the compute model read."""
    t, p = sc.training, sc.parallelism
    return intern(("compute", object_id(sc.model), t.micro_batch, t.dtype, t.recompute, t.flash_attention,
                   t.attention_kernel, t.recompute_modules, t.fp8_storage, t.fp8_recipe, t.framework,
                   object_id(sc.hardware),
                   p.tp, p.cp, p.ep, p.sequence_parallel and p.tp > 1, p.token_slices,
                   sc.communication.tp_overlap and p.tp > 1,   # chunked TP overlap (workloads/timing.py)
                   t.recompute_layers, t.offload_activations_layers, t.lora_rank, t.lora_targets,
                   # N layers of a chunk are a share of its layers (activations_recipes.chunk_layers)
                   (p.pp, p.vpp, p.pipeline_layout, p.stage_layers)
                   if t.recompute_layers or t.offload_activations_layers else None))


def network_key(sc: Scenario, free: bool) -> int:
    """Everything network.Network reads: the cluster, the degrees and their placement order, the
    collective library's options, the GPU (NCCL's generation, NVLink SHARP) and whether the
    pipeline wraps around (its WAN flow counts: network.groups.pipeline_wraps; a re-check found
    a 1F1B row priced on an interleaved row's network, 5.307 s against the simulation's 5.298)."""
    p, c = sc.parallelism, sc.communication
    return intern(("network", object_id(sc.cluster), p.tp, p.cp, sc.dp, p.pp, p.ep, p.order, c.algorithm,
                   c.library, c.protocol, object_id(sc.hardware.gpu), free,
                   # read on a WAN only: elsewhere interleaved and 1F1B rows share one network
                   sc.cluster.datacenters > 1 and pipeline_wraps(p)))


# Networks by key: every row of a sweep that keeps the cluster, the degrees and the library shares
# one (and its cached shapes and calls).  Bounded: cleared when a long session fills it.
_NETWORKS: dict[int, Network] = memo_table()
_MAX_NETWORKS = 4096
_SIZES: dict[tuple[int, str], int] = memo_table()


def shared_network(sc: Scenario, key: int, free: bool) -> Network:
    """The Network of ``key`` (built from the first scenario that asked for it)."""
    net = _NETWORKS.get(key)
    if net is None:
        if len(_NETWORKS) >= _MAX_NETWORKS:
            _NETWORKS.clear()
        net = _NETWORKS[key] = Network(sc, free=free)
    return net


class RowNetwork:
    """A network.Network for one row that shares its group shapes and priced calls with every row
    of the same :func:`network_key` (Network caches them per instance), while ``sc`` is the row's
    own scenario (fsdp_cost reads its framework and dtype from ``net.sc``)."""

    __slots__ = ("sc", "free", "net", "cost", "shape", "placement", "key")

    def __init__(self, sc: Scenario, free: bool, key: int) -> None:
        self.sc = sc
        self.net = shared_network(sc, key, free)
        self.free = free
        self.key = key
        self.cost = self.net.cost
        self.shape = self.net.shape
        self.placement = self.net.placement

    def group_size(self, dim: str, stage: int = 0) -> int:
        """Network.group_size without placing the group on the fabric: Fabric.shape's ``n`` is the
        number of members, and every group of a dimension is a translate of stage 0's (placement.py)."""
        key = (self.key, dim)
        n = _SIZES.get(key)
        if n is None:
            n = _SIZES[key] = len(self.net.members(dim, 0))
        return n

    def members(self, dim: str, stage: int) -> Any:
        return self.net.members(dim, stage)

    def stage_signature(self, stage: int) -> tuple:
        """The shapes of the groups a pass on ``stage`` talks to: stages that agree price alike."""
        shape = self.net.shape
        return tuple(shape(d, stage) for d in PASS_DIMS)
