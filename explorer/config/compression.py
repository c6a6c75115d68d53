"""The ``communication.compression`` section: gradients (or outer gradients) compressed on the wire.

How each kind is priced — bytes per element, the collective it needs, the encode/decode work on the
GPU and the error-feedback memory — is :mod:`explorer.network.compression`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

COMPRESSION_KINDS = ("none", "fp16", "fp8", "int4", "1bit", "topk", "powersgd")


@dataclass(frozen=True)
class Compression:
    """A gradient compressor: its kind, top-k's kept share and PowerSGD's rank."""

    kind: str = field(default="none", metadata={
        "choices": COMPRESSION_KINDS,
        "doc": "compress the data-parallel gradients (and the outer synchronisation or gossip exchange) "
               "on the wire: fp16/fp8/int4 quantise, 1bit keeps signs and a scale (1-bit Adam), topk "
               "keeps the largest ratio of the entries, powersgd sends rank-r factors "
               "(explorer/network/compression.py)"})
    ratio: float = field(default=0.01, metadata={
        "min": 1e-6, "max": 1.0, "why": "a share of the entries, 1e-6 to 1",
        "doc": "topk: share of the gradient entries sent (value + index each)"})
    rank: int = field(default=4, metadata={
        "min": 1, "max": 1024, "why": "1 to 1,024",
        "doc": "powersgd: rank of the P and Q factors of each weight matrix (Vogels et al. 2019: 1-4)"})

    @property
    def active(self) -> bool:
        return self.kind != "none"
