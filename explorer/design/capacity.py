"""GPU memory to compare a layout's memory with on clusters whose datacenters hold different GPUs
(``cluster.datacenters`` as a list with ``gpu``: explorer/variants/hetero.py).

The search keeps a layout as a recommendation only when it fits with headroom to spare
(analysis/verdict.py).  With one kind of GPU that is the busiest GPU's memory against the GPU's
capacity.  With several, the busiest GPU may sit on the largest board while a smaller one is all
but full (mixed-generations with ``hardware.gpu: b200`` and ZeRO-3 at tp 4, pp 8: 85.9 of 193.3 GB
read "107 GB free" while its H100 datacenter had 0.02 GB left).

- The ranking has only the busiest GPU's memory (the estimator's ``memory_GB_total``): it measures
  the headroom against the smallest board of the cluster (:func:`least_capacity_GB`), a bound that
  never calls a tight layout roomy;
- a layout priced in full is judged on its tightest GPU (:func:`tightest_gpu`): the GPU class with
  the least memory left on its own board.
"""
from __future__ import annotations

from ..config import Scenario
from ..variants.hetero import dc_gpu


def least_capacity_GB(sc: Scenario) -> float:
    """The smallest GPU memory of ``sc``'s cluster (GB = 1e9 B, as GPU.capacity_bytes)."""
    dcs = len(sc.cluster.datacenter_gpus)
    return min([sc.hardware.gpu.capacity_bytes] + [dc_gpu(sc, d).capacity_bytes for d in range(dcs)]) / 1e9


def tightest_gpu(sc: Scenario) -> tuple[float, float]:
    """(memory, capacity) in GB of the GPU class of ``sc`` with the least memory to spare on its
    own datacenter's board, from a full simulation (the first such class on a tie)."""
    from ..simulate import simulate  # deferred: the engine, for the top layouts only
    r = simulate(sc)
    best: tuple[float, float, float] | None = None
    for c, mb in zip(r.classes, r.memory_by_class, strict=True):
        cap = dc_gpu(sc, c.datacenter).capacity_bytes
        if best is None or cap - mb.total < best[0]:
            best = (cap - mb.total, mb.total / 1e9, cap / 1e9)
    assert best is not None
    return best[1], best[2]
