"""A serving deployment under an arrival rate instead of saturated (``inference.arrival_rate``).

Requests arrive at ``arrival_rate`` per second (Poisson), spread evenly over the replicas.  With
continuous batching a replica decodes the sequences that are in flight; in the steady state their
number is what Little's law gives, L = lambda x W (Little 1961): each replica must finish requests
as fast as they arrive.  The throughput of a replica grows with its batch (serving/deploy.py), so
the concurrency is the smallest whole batch whose requests/s keeps up with the arrivals, found by
bisection on the saturated model; ``inference.batch`` is then the cap (vLLM's max_num_seqs), and a
rate above the capacity at the cap is refused in one line — the queue would grow without bound.

The first token also waits for its prefill.  Prefills of one replica (co-located: the time a
prefill takes the GPUs from decoding; disaggregated: a prefill replica's pass) are served one after
another in a deterministic time S at a Poisson arrival rate; the mean wait of such an M/D/1 queue
is rho S / (2 (1 - rho)) with rho = lambda S (the Pollaczek-Khinchine formula for deterministic
service: Kleinrock, "Queueing Systems", vol. 1, 1975, Sec. 5.6), added to TTFT.  With a request-
length mix (serving/mix.py) the prompts' prefills differ by kind: the queue is M/G/1 and its mean
wait lambda E[S^2] / (2 (1 - lambda E[S])) (the same formula, general service).
"""
from __future__ import annotations

from dataclasses import replace

from ..config import Scenario, ScenarioError
from .deploy import Serving, saturated
from .mix import mean_output


def _at(sc: Scenario, batch: int) -> Serving:
    inf = sc.inference
    assert inf is not None
    return saturated(replace(sc, inference=replace(inf, batch=batch, arrival_rate=None)))


def md1_wait(rate: float, service_s: float) -> float:
    """Mean wait in queue of an M/D/1 server with arrivals ``rate`` per second and service time
    ``service_s`` (module docstring); infinite at or beyond saturation."""
    rho = rate * service_s
    return float("inf") if rho >= 1 else rho * service_s / (2 * (1 - rho))


def mg1_wait(rate: float, mean_s: float, mean_sq_s2: float) -> float:
    """Mean wait in queue of an M/G/1 server: arrivals ``rate`` per second, service times of mean
    ``mean_s`` and mean square ``mean_sq_s2`` (Pollaczek-Khinchine); infinite at or beyond saturation."""
    rho = rate * mean_s
    return float("inf") if rho >= 1 else rate * mean_sq_s2 / (2 * (1 - rho))


def under_load(sc: Scenario) -> Serving:
    """``sc``'s deployment at its arrival rate: the concurrency per replica that keeps up, TPOT at
    that batch, TTFT with the prefill queue's wait, and tokens/s of the requests actually served."""
    inf = sc.inference
    assert inf is not None and inf.arrival_rate is not None
    lam = inf.arrival_rate
    cap = _at(sc, inf.batch)
    cap_batch = min(inf.batch, cap.memory.max_batch) if cap.memory.max_batch > 0 else inf.batch
    if cap_batch != inf.batch:
        cap = _at(sc, cap_batch)
    if cap.requests_per_s < lam:
        raise ScenarioError("inference.arrival_rate", f"{lam:g} requests/s exceed what the deployment "
                            f"serves with {cap_batch:,} sequences per replica ({cap.requests_per_s:.4g} "
                            "requests/s): lower the rate, raise inference.batch or add replicas")
    lo, hi = 1, cap_batch                    # the smallest batch whose requests/s keeps up
    while lo < hi:
        mid = (lo + hi) // 2
        if _at(sc, mid).requests_per_s >= lam:
            hi = mid
        else:
            lo = mid + 1
    sv = _at(sc, lo)
    # A prompt holds its replica's prefill (co-located: the whole pass, or the chunk budget of its
    # mixed steps) or a prefill replica (disaggregated) for its TTFT.
    servers = sv.prefill_servers
    wait = (mg1_wait(lam / servers, sv.ttft_s, sv.ttft_sq_s2) if sv.ttft_by_kind
            else md1_wait(lam / servers, sv.ttft_s))
    if wait == float("inf"):
        raise ScenarioError("inference.arrival_rate", f"{lam:g} requests/s keep every prefill replica "
                            "busy: the first tokens would wait without bound; lower the rate or add "
                            "prefill replicas")
    replicas = sv.decode_layout.dp
    n_out = mean_output(inf)
    return replace(sv, ttft_s=sv.ttft_s + wait, requests_per_s=lam,
                   ttft_by_kind=tuple(t + wait for t in sv.ttft_by_kind),
                   output_tokens_per_s_per_gpu=lam * n_out / sv.gpus,
                   output_tokens_per_s_per_replica=lam * n_out / replicas,
                   arrival_rate=lam, queue_wait_s=wait, load=lam / cap.requests_per_s)


def serve(sc: Scenario) -> Serving:
    """The steady state of ``sc``'s deployment: saturated (``batch`` sequences always decoding,
    serving/deploy.py), or under its ``arrival_rate``."""
    inf = sc.inference
    assert inf is not None
    return saturated(sc) if inf.arrival_rate is None else under_load(sc)
