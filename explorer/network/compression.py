"""Gradient compression (``communication.compression``): bytes on the wire, the collective it needs,
the GPU work it costs and the memory its error feedback keeps.

Per gradient element of an fp32 reduction (4 bytes):

==========  ===================  ===================================  =====================================
kind        bytes on the wire    collective                           source
==========  ===================  ===================================  =====================================
fp16        2                    all-reduce (sums in fp16)            PyTorch DDP fp16_compress_hook
fp8         1                    all-to-all + all-gather              ZeRO++ qgZ (Wang et al., ICLR 2024)
int4        0.5 + 2/128 scale    all-to-all + all-gather              ZeRO++ qgZ, 4-bit blocks of 128
1bit        1/8                  all-to-all + all-gather              1-bit Adam (Tang et al., ICML 2021)
topk        8 x ratio            all-gather (sparse: value + index)   Shi et al., ICDCS 2019 / SparCML
powersgd    4 r (m+n) / (m n)    two all-reduces (P, then Q)          Vogels et al., NeurIPS 2019
==========  ===================  ===================================  =====================================

Quantised gradients cannot be summed hop by hop without re-quantising at every hop, so the
quantisers reduce in two phases: an all-to-all sends every rank its chunk from all others (summed
after decoding) and an all-gather returns the summed, re-quantised chunks.  Top-k entries differ
between ranks, so they are all-gathered: a rank receives (n-1) x k entries, growing with n.
PowerSGD's factors are linear in the gradient and are all-reduced.

Encode and decode are element-wise passes at HBM bandwidth (the simulator's convention for
element-wise work): reading the fp32 gradient and the error-feedback residual, writing the residual
and the code (encode), reading codes and accumulating fp32 (decode); top-k's radix selection reads
its keys four times (one pass per byte of a 32-bit key); PowerSGD's three skinny products M Q,
M^T P and P Q^T each read M once.  Biased compressors keep an fp32 error-feedback residual per
parameter (Karimireddy et al., "Error Feedback Fixes SignSGD", ICML 2019; Seide et al. 2014).

When the reduction overlaps the backward (``communication.dp_overlap``), the kinds that run as
communication hooks of PyTorch DDP or inside ZeRO's bucketed reduction (fp16: fp16_compress_hook;
powersgd: powerSGD_hook, Vogels et al. Sec. 5; fp8/int4: ZeRO++ qgZ in the backward's
reduce-scatter; top-k as a DDP hook) encode each bucket as it becomes ready and send it at once;
1-bit Adam compresses inside the optimizer step (DeepSpeed's OnebitAdam.step calls its
compressed_allreduce), after the backward (``OVERLAPS_BACKWARD``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.compression import Compression
from ..config.sections import Model
from ..workloads.convnet import arch as convnet_arch

# Kinds whose buckets leave during the backward when it overlaps (module docstring).
OVERLAPS_BACKWARD = frozenset({"none", "fp16", "fp8", "int4", "topk", "powersgd"})
INT4_BLOCK = 128                  # elements per fp16 scale of the 4-bit code
# fp32 error-feedback residual per parameter of the biased compressors (fp16 rounds, unbiased enough).
EF_BYTES = {"none": 0.0, "fp16": 0.0, "fp8": 4.0, "int4": 4.0, "1bit": 4.0, "topk": 4.0, "powersgd": 4.0}
REDUCE_BYTES = 4.0                # the uncompressed reduction's element (fp32)


@dataclass(frozen=True)
class Plan:
    """How one compressed reduction of E elements runs: per element, the bytes of the buffer each
    collective moves and the HBM bytes of encode and decode; the collectives in order."""

    kind: str
    wire: float                       # bytes per element of the compressed buffer
    ops: tuple[tuple[str, float], ...]  # (collective, buffer bytes per element) in order
    encode_bytes: float               # HBM bytes per element to encode
    decode_bytes: float               # HBM bytes per element to decode
    ef_bytes: float                   # error-feedback memory per parameter

    def seconds(self, elements: float, hbm_Bps: float) -> float:
        """Encode plus decode of ``elements`` at ``hbm_Bps``."""
        return elements * (self.encode_bytes + self.decode_bytes) / hbm_Bps


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """(P + Q elements) / (gradient elements) of one layer's weight matrices, each m x n cut by tp:
    r (m + n) / (m n) summed over QKV, the output projection and the MLP (Vogels et al. 2019)."""
    if m.conv is not None:
        # A ResNet (explorer/workloads/convnet/arch.py): each kernel reshaped to a matrix; the batch-norm
        # vectors and biases are sent uncompressed (PowerSGD all-reduces rank-1 tensors as they are).
        c = m.conv
        net = convnet_arch.build(c.depth, c.image_size, c.frames, c.width, c.classes)
        mats = sum(min(rank * (a + b), a * b) for a, b in net.matrices)
        return min(1.0, (mats + net.params - sum(a * b for a, b in net.matrices)) / net.params)
    h, f = m.hidden, m.ffn_hidden
    assert f is not None                         # filled by the defaults (config/loading.py)
    kv = (m.kv_heads or m.heads) * (h // m.heads)
    mats = 3 if m.ffn_kind == "swiglu" else 2
    shapes = [(h, (h + 2 * kv) / tp), (h / tp, h)] + [(h, f / tp)] * (mats - 1) + [(f / tp, h)]
    full = sum(a * b for a, b in shapes)
    return min(1.0, sum(rank * (a + b) for a, b in shapes) / full)


def plan(c: Compression, m: Model, tp: int, n: int) -> Plan:
    """The plan of compressor ``c`` for a group of ``n`` ranks (module docstring's table)."""
    k = c.kind
    if k == "none":
        return Plan(k, REDUCE_BYTES, (("all-reduce", REDUCE_BYTES),), 0.0, 0.0, 0.0)
    if k == "fp16":
        return Plan(k, 2.0, (("all-reduce", 2.0),), 4 + 2, 2 + 4, 0.0)
    if k in ("fp8", "int4", "1bit"):
        q = {"fp8": 1.0, "int4": 0.5 + 2 / INT4_BLOCK, "1bit": 1 / 8}[k]
        # encode: read grad + residual, write residual + code; decode: read the n codes of its
        # chunk (all-to-all) and the gathered codes, write fp32.
        return Plan(k, q, (("all-to-all", q), ("all-gather", q)), 4 + 4 + 4 + q, 2 * q + 4, EF_BYTES[k])
    if k == "topk":
        kept = 8.0 * c.ratio                         # fp32 value + int32 index per kept entry
        # The all-gather's buffer is every rank's entries: n x kept per element of one rank.
        return Plan(k, kept, (("all-gather", n * kept),), 4 * 4 + 4 + 4 + kept, n * kept + 4, EF_BYTES[k])
    factor = powersgd_factor(m, tp, c.rank)
    half = REDUCE_BYTES * factor / 2                 # P and Q, about half each
    return Plan(k, REDUCE_BYTES * factor, (("all-reduce", half), ("all-reduce", half)),
                4 + 4 + 4 + 4, 4 + 4, EF_BYTES[k])



def residual_bytes(c: Compression, dense: float, expert: float, dp_group: int, edp_group: int) -> float:
    """Error-feedback memory of one GPU: an fp32 residual per parameter whose gradient is compressed
    (dense ones when its data-parallel group has more than one rank, experts likewise), kept whole
    even under ZeRO: the residual belongs to the local gradient, before any reduction."""
    return EF_BYTES[c.kind] * ((dense if dp_group > 1 else 0.0) + (expert if edp_group > 1 else 0.0))
