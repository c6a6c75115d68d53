"""Docstring examples are tests: every module of explorer/ except the Streamlit UI runs its
doctests here (the UI needs a running app; ``__main__`` runs the CLI on import)."""
from __future__ import annotations

import doctest
import importlib

import pytest

from conftest import ROOT

SKIP = {"explorer.__main__"}


def core_modules() -> list[str]:
    """Dotted names of every module under explorer/ outside explorer/ui."""
    names = []
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "ui" in parts[1:]:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name not in SKIP:
            names.append(name)
    return names


@pytest.mark.parametrize("name", core_modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_doctests_exist():
    """The examples this suite relies on are collected (a rename would silently drop them)."""
    found = sum(len(doctest.DocTestFinder().find(importlib.import_module(n))) for n in core_modules())
    assert found > 20
