"""The linter is part of the suite: `ruff check .` from the repository root finds nothing.

The rules (E F W I B UP, line length 110) are in pyproject.toml; ruff is pinned in
requirements-dev.txt.  Skipped only when ruff is not importable.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("ruff")


def test_ruff_check_is_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
