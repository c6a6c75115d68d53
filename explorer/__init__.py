"""CommExplorer: an analytic simulator of communication in distributed deep-learning training.

Scenario -> (workload, topology, placement) -> task graph -> engine -> timeline -> analysis.

>>> from explorer import load, simulate            # doctest: +SKIP
>>> simulate(load("scenarios/teaching-8gpu.yaml")).iteration_time_s   # doctest: +SKIP
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .scenario import Scenario, ScenarioError, from_dict, load

__all__ = ["Scenario", "ScenarioError", "from_dict", "load", "simulate"]


def __getattr__(name: str) -> Any:
    """``load``, ``from_dict``, ``Scenario``, ``ScenarioError`` from explorer.scenario, imported on
    first use (PEP 562): importing a leaf such as explorer.dimensions stays cheap, and a registry
    entry added before the simulator's modules import is seen by all of them."""
    if name in ("Scenario", "ScenarioError", "from_dict", "load"):
        return getattr(import_module(".scenario", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def simulate(sc: Scenario, fold: bool = True):
    """Simulate one iteration (see explorer.simulate.simulate).  Imported on first use; after that
    ``explorer.simulate`` is the submodule, itself callable the same way (explorer/simulate.py)."""
    from .simulate import simulate as _simulate
    return _simulate(sc, fold)
