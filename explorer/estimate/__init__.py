"""A fast, vectorised estimate of many configurations, from the engine's own cost functions.

``estimate_many(scenarios)`` returns :class:`Estimates` (iteration time, breakdown, memory, fit,
MFU, tokens/s), one row per validated scenario; ``estimate(sc)`` one row; ``estimate_overrides(raw,
overrides)`` many dotted-key variants of one base, validated faster than ``from_dict`` one by one,
with per row the one-line reason it is invalid.

How: the rows are priced by explorer/pricing (one row as arrays over stages, a schedule's program
compiled once per shape, the engine's longest path over it); this package groups and assembles them:

==============  ==================================================================================
many            estimate_many: grouping, assembly, throughput and MFU; the rows it leaves to the
                full simulation (explorer.variants.registry says which scenarios those are)
fast            estimate_many(..., exact=False): long rows at two short unit counts, extrapolated
overrides       estimate_overrides: the fast validation of many overrides of one base
result          the Estimates record
==============  ==================================================================================

Agreement: equal to ``explorer.simulate.simulate`` to float rounding (iteration time, memory,
fit, and the breakdown category by category) on every shipped scenario and on random valid
scenarios (tests/test_estimator.py, tests/test_estimator_breakdown.py); with
``exact=False`` (what search ranks with) within fast.STATED_BOUND, layout rankings kept.
"""
from __future__ import annotations

from importlib import import_module

__all__ = ["Estimates", "estimate", "estimate_many", "estimate_overrides", "scenarios_from_overrides"]
# Where each name lives, imported on first use (PEP 562): importing the package stays cheap.
_HOME = {"Estimates": ".result", "estimate": ".many", "estimate_many": ".fast",
         "estimate_overrides": ".overrides", "scenarios_from_overrides": ".overrides"}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(_HOME[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
