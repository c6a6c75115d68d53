"""Where PipeDream's stage replicas sit (``parallelism.stage_replicas``) and the groups they form.

PipeDream places the replicas of a stage on consecutive workers, stage after stage (Narayanan et
al., SOSP 2019, Sec. 3.1: the optimizer assigns each stage a contiguous set of workers; its VGG-16
"15-1" runs stage 0 on ranks 0-14 and stage 1 on rank 15, msr-fiddle/pipedream
runtime/image_classification/models/vgg16/gpus=16/hybrid_conf.json).  Each replica holds
tp x cp GPUs, contiguous.  So:

- stage s's data-parallel group: replica k of stage s for every k (its gradient all-reduce);
- a pipeline transfer of micro-batch j goes from replica j mod r_s to replica j mod r_(s+1), over
  whatever link separates those two GPUs.  Its group is named by an integer ``code`` so that the
  network's (op, size, dim, stage) cost memo keeps working: code < pp is the plain pair (replica 0
  to replica 0), otherwise :func:`pair_code` packs (pair, sender replica, receiver replica).
"""
from __future__ import annotations

import numpy as np

from ..config import Scenario


def first_replica_slot(replicas: tuple[int, ...], stage: int) -> int:
    """The replica slot (a block of tp x cp GPUs) where ``stage``'s first replica sits."""
    return sum(replicas[:stage])


def replica_gpu(sc: Scenario, stage: int, k: int) -> int:
    """GPU id of (tp, cp) rank 0 of replica ``k`` of ``stage``."""
    r = sc.parallelism.stage_replicas
    assert r                                            # only asked when the field is set
    block = sc.parallelism.tp * sc.parallelism.cp
    return (first_replica_slot(r, stage) + k % r[stage]) * block


def pair_code(sc: Scenario, pair: int, sender: int, receiver: int) -> int:
    """The ``stage`` argument that names the transfer of ``pair`` from replica ``sender`` of stage
    ``pair`` to replica ``receiver`` of the next stage (see the module docstring)."""
    r = sc.parallelism.stage_replicas
    assert r
    if sender == 0 and receiver == 0:
        return pair
    return pair + sc.parallelism.pp * (1 + sender * max(r) + receiver)


def decode(sc: Scenario, code: int) -> tuple[int, int, int]:
    """(pair, sender replica, receiver replica) of a :func:`pair_code`."""
    r, pp = sc.parallelism.stage_replicas, sc.parallelism.pp
    assert r
    if code < pp:
        return code, 0, 0
    rest, pair = divmod(code, pp)
    sender, receiver = divmod(rest - 1, max(r))
    return pair, sender, receiver


def replica_members(sc: Scenario, dim: str, code: int) -> np.ndarray | None:
    """GPU ids of the ``dp`` group of stage ``code`` or of the ``pp`` transfer ``code``; None for
    the other dimensions (their groups lie inside one replica: the ordinary placement's)."""
    if dim == "dp":
        r = sc.parallelism.stage_replicas
        assert r
        return np.array([replica_gpu(sc, code, k) for k in range(r[code])], dtype=np.int64)
    if dim == "pp":
        pair, a, b = decode(sc, code)
        nxt = (pair + 1) % sc.parallelism.pp
        return np.array([replica_gpu(sc, pair, a), replica_gpu(sc, nxt, b)], dtype=np.int64)
    return None
