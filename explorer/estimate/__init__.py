"""A fast, vectorised estimate of many configurations, from the engine's own cost functions.

``estimate_many(scenarios)`` returns :class:`Estimates` (iteration time, breakdown, memory, fit,
MFU, tokens/s), one row per validated scenario; ``estimate(sc)`` one row; ``estimate_overrides``
many configurations given as dotted-key overrides of one base, with a cheaper validation.
"""
from .many import estimate, estimate_many
from .result import Estimates

__all__ = ["Estimates", "estimate", "estimate_many"]
