"""Low-communication training: replicas that synchronise every H steps (``training.sync``).

==========  ======================================================================================
window      the inner step (one datacenter alone), the outer synchronisation over the WAN, the
            amortised time per step and bytes per tier (local SGD, DiLoCo, Streaming DiLoCo, c-BTM)
quality     what each technique's paper reports about model quality (cited, never simulated)
==========  ======================================================================================
"""
from .window import STEP_TIERS, SyncWindow, inner_scenario, simulate_window, window

__all__ = ["STEP_TIERS", "SyncWindow", "inner_scenario", "simulate_window", "window"]
