"""How unevenly routed tokens land on expert-parallel ranks.

Expert popularity follows a Zipf law with exponent ``skew`` (0 = uniform): expert i (1-based,
by popularity) receives a share proportional to i^-skew of the token copies.  Measured router
statistics are heavy-tailed in this way (e.g. Fedus et al., Switch Transformer, 2021, Sec. 2.2,
on why a load-balancing loss is needed; DeepSeek-V3, arXiv 2412.19437, Sec. 2.1.2, bias-based
balancing).  A token picks ``top_k`` *distinct* experts, so no expert can receive more than
1/top_k of the copies: shares above that cap are clipped and the excess spread over the others
(water-filling).  Experts are placed round-robin over the EP ranks (expert i on rank i mod ep,
so the most popular experts are spread out, the placement a balancing framework aims for); the
busiest rank's load relative to the mean is the factor that stretches its expert GEMMs and the
all-to-all it receives, and, with dropless routing, multiplies the routed token copies whose
activations that rank keeps for the backward (:func:`routed_copy_load`, activations_terms.py).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...config import MoE


@lru_cache(maxsize=256)
def busiest_rank_factor(experts: int, ep: int, top_k: int, skew: float) -> float:
    """Load of the busiest of ``ep`` ranks / the mean rank load (1.0 when routing is uniform).

    >>> busiest_rank_factor(256, 64, 8, 0.0)
    1.0
    >>> round(busiest_rank_factor(8, 8, 2, 1.0), 3)   # Mixtral-like: the top expert gets 8/H_8 = 2.94x
    2.943
    """
    if experts <= 0 or ep <= 1 or skew <= 0:
        return 1.0
    share = np.arange(1, experts + 1, dtype=float) ** -skew
    share /= share.sum()
    cap = 1.0 / max(top_k, 1)
    for _ in range(experts):                 # water-filling: clip at the cap, renormalise the rest
        over = share > cap
        if not over.any() or cap * over.sum() >= 1.0:
            break
        free = ~over
        share[free] *= (1.0 - cap * over.sum()) / share[free].sum()
        share[over] = cap
    per_rank = np.bincount(np.arange(experts) % ep, weights=share, minlength=ep)
    return float(per_rank.max() * ep)


def routed_copy_load(moe: MoE | None, ep: int) -> float:
    """Routed token copies the busiest of ``ep`` expert ranks receives over the balanced mean: the
    skew's :func:`busiest_rank_factor` times ``moe.imbalance``, the factor the layer's time uses
    (workload.py ``spec``); 1 without routed experts, or with ``ep`` <= 1, where one GPU receives
    every copy whichever expert it goes to.  With experts numbered by popularity and placed round
    robin (module docstring), the same rank (the one holding the most popular expert) is the busiest
    in every MoE layer, so a pipeline stage's worst GPU holds this load in each of its MoE layers.
    Routing is dropless (Megatron-Core's default: no ``moe_expert_capacity_factor``, so no token is
    dropped; the scenario has no capacity field), so no capacity caps the load."""
    if moe is None or not moe.routed or ep <= 1:
        return 1.0
    return busiest_rank_factor(moe.experts, ep, moe.top_k, moe.skew) * moe.imbalance
