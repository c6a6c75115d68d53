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
all-to-all it receives.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np


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
