"""Subcommands beyond run/collective/validate/list, one module each.

Each module listed in :data:`COMMANDS` defines ``NAME`` (the subcommand), ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; :mod:`explorer.cli` adds them to its parser and
wraps them in the same error handling (invalid input: one line, exit 2), so a command only raises
:class:`~explorer.scenario.ScenarioError` for bad input.
"""
from __future__ import annotations

from importlib import import_module
from types import ModuleType

# Registration order is the order of ``--help``.  Modules are imported lazily so ``list`` and
# ``validate`` stay fast.
COMMAND_MODULES: tuple[str, ...] = ("diff", "sweep", "search", "sensitivity", "scaling", "advise",
                                     "consensus", "report", "import_trace", "calibrate_fabric")


def commands() -> list[ModuleType]:
    """The command modules, imported."""
    return [import_module(f"{__name__}.{m}") for m in COMMAND_MODULES]
