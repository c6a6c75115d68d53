"""The serving equivalent of the scaling view: TPOT and output tokens/s per GPU over the batch, with
the knee marked (issue 37, "a latency-throughput curve over batch size, with the knee marked").

The batch doubles from 1 up to the largest the KV cache allows (serving/memory.py).  Throughput per
GPU is batch / TPOT, so a doubling of the batch pays when TPOT grows by less than 2x; it buys as
much throughput (2 TPOT_b / TPOT_2b) as it costs latency (TPOT_2b / TPOT_b) when TPOT grows by
sqrt(2).  The knee is the largest batch reached while every doubling grew TPOT by at most sqrt(2):
beyond it the latency cost of batching outruns its throughput gain.  This criterion (equal relative
gain and cost) is this module's definition, not a published one.
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..config import Scenario
from .deploy import saturated

KNEE_GROWTH = math.sqrt(2.0)     # TPOT growth per doubling at which gain and cost are equal
MAX_POINTS = 13                  # batches 1 .. 4,096


def batch_curve(sc: Scenario, max_batch: int) -> tuple[list[dict[str, float]], int]:
    """(points, knee batch) of ``sc`` with its batch doubled from 1 to ``max_batch`` (at least 1):
    each point {batch, tpot_s, ttft_s, output_tokens_per_s_per_gpu, requests_per_s}."""
    inf = sc.inference
    assert inf is not None
    points: list[dict[str, float]] = []
    b = 1
    while b <= max(max_batch, 1) and len(points) < MAX_POINTS:
        sv = saturated(replace(sc, inference=replace(inf, batch=b, arrival_rate=None)))
        points.append({"batch": b, "tpot_s": sv.tpot_s, "ttft_s": sv.ttft_s,
                       "output_tokens_per_s_per_gpu": sv.output_tokens_per_s_per_gpu,
                       "requests_per_s": sv.requests_per_s,
                       # A mix's prefills differ by kind: their mean square (the M/G/1 queue's).
                       **({"ttft_sq_s2": sv.ttft_sq_s2} if sv.ttft_by_kind else {})})
        b *= 2
    knee = int(points[0]["batch"])
    for before, after in zip(points, points[1:], strict=False):
        if after["tpot_s"] > KNEE_GROWTH * before["tpot_s"]:
            break
        knee = int(after["batch"])
    return points, knee
