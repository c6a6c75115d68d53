"""CommExplorer: an analytic simulator of communication in distributed deep-learning training.

Scenario -> (workload, topology, placement) -> task graph -> engine -> timeline -> analysis.

>>> from explorer import load, simulate            # doctest: +SKIP
>>> simulate(load("scenarios/teaching-8gpu.yaml")).iteration_time_s   # doctest: +SKIP
"""
from .scenario import Scenario, ScenarioError, from_dict, load

__all__ = ["Scenario", "ScenarioError", "from_dict", "load", "simulate"]


def simulate(sc: Scenario, fold: bool = True):
    """Simulate one iteration (see explorer.simulate.simulate).  Imported on first use; after that
    ``explorer.simulate`` is the submodule, itself callable the same way (explorer/simulate.py)."""
    from .simulate import simulate as _simulate
    return _simulate(sc, fold)
