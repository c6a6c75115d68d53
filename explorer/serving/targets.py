"""The requests/s a deployment serves within its latency targets (``inference.tpot_target_ms``,
``inference.ttft_target_ms``): DistServe's "goodput" (Zhong et al., OSDI 2024, Sec. 2: the highest
rate served within the SLOs), here on the mean latencies of the batch curve (serving/curve.py).

- **TPOT** does not depend on the arrival rate once a replica runs its batch: a point of the curve
  meets the target or not.
- **TTFT** does: a prompt waits for its prefill.  Prefills of the deployment's ``servers`` prefill
  replicas (co-located: the decode replicas, a prefill taking the GPUs from decoding; disaggregated:
  the prefill pool's replicas) are served in a deterministic time S at Poisson arrivals, whose mean
  wait in an M/D/1 queue is rho S / (2 (1 - rho)) with rho = lambda S per server (Pollaczek-
  Khinchine, Kleinrock, "Queueing Systems", vol. 1, 1975, Sec. 5.6; serving/load.py).  The mean TTFT
  S + wait stays within a target G > S while rho <= 2 (G - S) / (S + 2 (G - S)), so the rate is at
  most servers x rho / S; a prefill longer than G meets it at no rate.

With a request-length mix (serving/mix.py) the prefills differ by kind: the queue is M/G/1, its
mean wait lambda E[S^2] / (2 (1 - lambda E[S])), and the bound lambda <= 2x / (E[S^2] + 2x E[S])
per server with x = G - E[S] (for one kind, E[S^2] = S^2, the M/D/1 bound above).

A point's requests/s within the targets is its capacity (saturated requests/s) when it meets the
TPOT target, capped by the TTFT rate; the best point serves the most.  Means, not the percentiles
DistServe attains (a P90 would need the wait's distribution): said wherever the figure is shown.
"""
from __future__ import annotations

import math


def ttft_rate(service_s: float, target_s: float, servers: int, mean_sq_s2: float | None = None) -> float:
    """Highest Poisson rate (requests/s) at which the mean TTFT — prefill ``service_s`` (a mean,
    with ``mean_sq_s2`` its mean square for a mix) plus the queue's wait over ``servers`` prefill
    replicas — stays within ``target_s`` (module docstring)."""
    slack = target_s - service_s
    if slack < 0 or service_s <= 0:
        return 0.0 if service_s > 0 else math.inf
    if mean_sq_s2 is not None:
        return servers * 2 * slack / (mean_sq_s2 + 2 * slack * service_s)
    rho = 2 * slack / (service_s + 2 * slack)
    return servers * rho / service_s


def within_targets(point: dict[str, float], tpot_s: float | None, ttft_s: float | None,
                   servers: int) -> float:
    """Requests/s of the curve point ``point`` within the targets (None: no such target)."""
    if tpot_s is not None and point["tpot_s"] > tpot_s:
        return 0.0
    rate = point["requests_per_s"]
    if ttft_s is not None:
        rate = min(rate, ttft_rate(point["ttft_s"], ttft_s, servers, point.get("ttft_sq_s2")))
    return rate


def at_target(points: list[dict[str, float]], tpot_s: float | None, ttft_s: float | None = None,
              servers: int = 1) -> tuple[dict[str, float], float] | None:
    """The point of ``points`` that serves the most requests/s within the targets, with that rate
    (ties: the smaller batch), or None when no point serves any."""
    rated = [(within_targets(p, tpot_s, ttft_s, servers), p) for p in points]
    rated = [(r, p) for r, p in rated if r > 0]
    if not rated:
        return None
    rate, best = max(rated, key=lambda rp: (rp[0], -rp[1]["batch"]))
    return best, rate
