"""The recompute policy in force, from ``training.recompute``, ``recompute_modules`` and
``recompute_layers``.

Naming recompute modules other than the default with ``recompute: none`` recomputes them
(selective).  Megatron-Core reads recompute_modules only under granularity "selective"; NeMo's
performance recipes give the modules alone (model_configs_*.csv's ``recompute_modules`` column,
e.g. DeepSeek-V3's "core_attn/mla_up_proj", has no granularity column) and set "selective" when
they are given, so a scenario that names them means them (DeepSeek-V3 Sec. 3.2.3's recipe as a
user writes it).  :func:`modules_override_none` tells when that happened, for the run to say so.
"""
from __future__ import annotations

from .sections import Training

DEFAULT_MODULES = ("core_attn",)       # training.recompute_modules' default (Megatron-Core's)


def modules_override_none(tr: Training) -> bool:
    """Whether ``recompute: none`` is overridden by named modules (recomputed selectively)."""
    named = tuple(tr.recompute_modules) != DEFAULT_MODULES
    return tr.recompute == "none" and named and not tr.recompute_layers


def recompute_in_force(tr: Training) -> str:
    """``none``, ``selective`` or ``full``: ``training.recompute``, but selective where named modules
    override ``none`` (module docstring)."""
    return "selective" if modules_override_none(tr) else tr.recompute
