"""The ``gnn`` dimension's calls (explorer/dimensions.py; its group is the dp group: the graph's
partitions are the data-parallel replicas), as generic edges on each layer
(:class:`~explorer.workloads.spec.Edge`):

- mini-batch: before the first layer's forward, the remote input features of the sampled frontier
  (sampling.fetch_bytes): an all-to-all over the partitions (DistDGL's KVStore pulls each remote
  row from the partition that owns it, Zheng et al. 2020, Sec. 4.2);
- full graph: at every layer, the halo rows of the layer's input in forward and their gradients in
  backward (the first layer's input features take no gradient), an all-to-all between neighbouring
  partitions (CAGNET, Tripathy et al. SC20, Sec. 4; PipeGCN, Wan et al. ICLR 2022, Sec. 3).

nccl-tests sizes an all-to-all by the whole buffer a rank sends, its own share included, and moves
(n - 1)/n of it over the network (explorer/network/collectives.bus_factor): the buffer is the
remote bytes x n / (n - 1), so the bytes counted on the ``gnn`` dimension are the remote bytes.
``model.gnn.overlap`` runs them on the gnn stream under compute (the next mini-batch's features
prefetched: DistDGLv2, SALIENT; the stale halo of the previous step: PipeGCN).
"""
from __future__ import annotations

from dataclasses import replace

from ...config import Scenario
from ...physics.hardware import BYTES_PER_ELEMENT
from ..spec import Edge, LayerCost
from . import costs, sampling

OP = "all-to-all"


def _buffer(remote_bytes: float, n: int) -> float:
    """The all-to-all buffer whose (n-1)/n share is ``remote_bytes`` (module docstring)."""
    return remote_bytes * n / (n - 1) if n > 1 else 0.0


def layer_edges(sc: Scenario, index: int, blk: costs.Block) -> tuple[Edge, ...]:
    """The gnn edges of layer ``index`` (input layer 0) with block ``blk``, in the order its passes
    make them."""
    g = sc.model.gnn
    assert g is not None
    n = sc.dp
    if n <= 1:
        return ()
    ov = g.overlap
    if g.mode == "minibatch":
        if index != 0:
            return ()
        size = _buffer(sampling.fetch_bytes(g, costs.seeds(sc)), n)
        return (Edge("gnn", "fwd", OP, size, ov, "remote feature fetch"),) if size > 0 else ()
    e = g.feature_bytes if index == 0 else BYTES_PER_ELEMENT[sc.training.dtype]
    fwd = _buffer(sampling.halo_bytes(g, blk.d_in, e), n)
    out = [Edge("gnn", "fwd", OP, fwd, ov, "halo features")]
    if index > 0:
        bwd = _buffer(sampling.halo_bytes(g, blk.d_in, BYTES_PER_ELEMENT[sc.training.dtype]), n)
        out.append(Edge("gnn", "bwd", OP, bwd, ov, "halo gradients"))
    return tuple(x for x in out if x.size_bytes > 0)


def with_edges(sc: Scenario, index: int, lc: LayerCost, blk: costs.Block) -> LayerCost:
    """``lc`` with layer ``index``'s gnn edges."""
    edges = layer_edges(sc, index, blk)
    return replace(lc, edges=edges) if edges else lc
