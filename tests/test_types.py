"""The type checker over explorer/ (pyproject.toml's [tool.mypy]): no error, no blanket ignore.

mypy runs as CI runs it, from the repository root with the pinned version (requirements-dev.txt);
a cold run checks 226 modules in about 30 s of CPU, so it is in the slow tier.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT

IGNORE = re.compile(r"#\s*type:\s*ignore(\[[a-z-]+(,\s*[a-z-]+)*\])?")


@pytest.mark.slow
def test_mypy_finds_no_error_in_explorer():
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -r requirements-dev.txt")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"mypy found errors:\n{run.stdout}{run.stderr}"
    assert "no issues found" in run.stdout


def test_every_ignore_names_its_error_and_says_why():
    """A ``# type: ignore`` silences one error code, and a comment on the line above says why."""
    found = []
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for k, line in enumerate(lines):
            m = IGNORE.search(line)
            if m is None:
                continue
            found.append(path)
            rel = f"{path.relative_to(ROOT)}:{k + 1}"
            assert m.group(1), f"{rel}: a bare type: ignore; name the error code"
            assert k > 0 and lines[k - 1].strip().startswith("#"), f"{rel}: say why on the line above"
    assert len(found) <= 4, f"{len(found)} ignores; fix the types rather than add one"


def test_missing_imports_are_ignored_only_for_untyped_packages():
    """ignore_missing_imports names packages that ship neither types (py.typed) nor stubs, by name:
    a package that starts shipping types is checked again."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert "ignore_missing_imports" not in config        # never for every package
    names = {m.split(".")[0] for o in config["overrides"] if o.get("ignore_missing_imports")
             for m in o["module"]}
    assert names == {"plotly", "kaleido"}
    for name in names:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        assert not (Path(spec.origin).parent / "py.typed").exists(), f"{name} ships types now"
