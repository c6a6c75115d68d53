"""Scenario: the frozen description of one training setup, loaded strictly from YAML or JSON.

This module is the stable entry point: it re-exports the public API of :mod:`explorer.config`,
where the parts live (sections, presets, overrides, rules, loading; see its docstring), so
``from explorer.scenario import Scenario, load`` keeps working whatever moves inside.

A scenario file is a mapping with the sections ``model``, ``training``, ``hardware``, ``cluster``,
``parallelism`` and ``communication`` (see README, "Scenario format").  Every number carries its
unit in its key; GB = 1e9 bytes and Gbps = 1e9 bit/s, as nccl-tests reports them.  Loading
resolves presets (``model.preset``, ``hardware.gpu``), fills the derived defaults once
(``kv_heads``, ``ffn_hidden``, ``fp8_tflops``, ``dp``, scale-up bandwidth; table in
:mod:`explorer.config.loading`), checks every cross-field rule (:mod:`explorer.config.rules`)
and then the checks that need the simulator's model (:mod:`explorer.runnable`: the work budget,
...), so a :class:`Scenario` it returns is always simulable.
Code below the simulator imports :mod:`explorer.config` instead.

>>> sc = load(shipped_scenarios()["teaching-8gpu"], {"parallelism.pp": 2, "parallelism.dp": 4})
>>> sc.parallelism.pp, sc.dp
(2, 4)
"""
from .config import *  # noqa: F403 - the facade re-exports the package's public API
from .config import __all__  # noqa: F401
from .runnable import from_dict, load, validate  # noqa: F401 - config's, plus the simulator's checks
