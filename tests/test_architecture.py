"""Layering rules a newcomer relies on: the core never imports Streamlit (only explorer/ui does),
modules stay small, and the package metadata agrees with the requirements files."""
from __future__ import annotations

import ast
import tomllib

from conftest import ROOT


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_core_never_imports_streamlit():
    core = [p for p in (ROOT / "explorer").rglob("*.py")
            if "ui" not in p.relative_to(ROOT / "explorer").parts]
    assert len(core) > 15
    offenders = [str(p.relative_to(ROOT)) for p in core if "streamlit" in imported_modules(p)]
    assert offenders == []


def test_the_ui_package_is_where_streamlit_lives():
    ui = list((ROOT / "explorer" / "ui").rglob("*.py"))
    assert any("streamlit" in imported_modules(p) for p in ui)


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    """Big modules are where concepts hide; every module of explorer/ stays under 400 lines."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in (ROOT / "explorer").rglob("*.py")}
    assert {k: n for k, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def _pins(lines: list[str]) -> set[str]:
    """Requirement lines without comments, blanks and ``-r`` includes."""
    return {ln.split("#")[0].strip() for ln in lines} - {""} - {ln for ln in lines if ln.startswith("-r")}


def test_pyproject_pins_what_the_requirements_files_pin():
    """pip install . and pip install -r requirements*.txt give the same versions."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = _pins((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    dev = _pins((ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines())
    extras = project["optional-dependencies"]
    assert set(project["dependencies"]) == runtime
    assert set(extras["test"]) | {d for d in extras["dev"] if not d.startswith("commexplorer")} == dev


def test_the_console_script_is_the_module_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"commexplorer": "explorer.cli:main"}
    assert "from .cli import main" in (ROOT / "explorer" / "__main__.py").read_text(encoding="utf-8")
