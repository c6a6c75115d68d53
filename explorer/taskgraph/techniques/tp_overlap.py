"""Tensor-parallel communication overlapped with the GEMMs it feeds: chunked collective matmul
(Wang et al., "Overlap Communication with Dependent Computation via Decomposition in Large Deep
Learning Models", ASPLOS 2023; Megatron-Core's ``tp_comm_overlap``).

Each TP collective is split into TP_OVERLAP_CHUNKS pieces pipelined against the matching pieces of
its GEMM: all but the first piece hide behind compute, so at best 1/TP_OVERLAP_CHUNKS of the
collective stays exposed, and all of its excess over the GEMM when communication is slower.
"""
from __future__ import annotations

# Pieces a collective matmul splits the GEMM and its collective into.  Wang et al. (ASPLOS 2023,
# Sec. 4) decompose by the devices of the ring; NVIDIA TransformerEngine's comm-GEMM overlap example
# (examples/pytorch/comm_gemm_overlap) configures its pipelined reduce-scatter overlap with
# num_splits = 4, the representative value taken here.  Not a measured constant: a sensitivity knob.
TP_OVERLAP_CHUNKS = 4


def _split_even(total: float, k: int) -> list[float]:
    return [total / k] * k if k else []


def exposed_tp(tp_f: float, tp_b: float, gemm_f_s: float, calls_f: int, calls_b: int) -> tuple[float, float]:
    """Exposed forward and backward TP seconds of one layer whose ``calls_f`` forward collectives
    (``tp_f`` seconds in all) each hide behind an equal share of the forward GEMMs (``gemm_f_s``)
    and whose ``calls_b`` backward ones (``tp_b``) behind twice that (the backward's GEMMs are twice
    the forward's: input and weight gradients)."""
    per = gemm_f_s / calls_f
    f = sum(max(c - per, c / TP_OVERLAP_CHUNKS) for c in _split_even(tp_f, calls_f))
    b = sum(max(c - 2 * per, c / TP_OVERLAP_CHUNKS) for c in _split_even(tp_b, calls_b))
    return f, b
