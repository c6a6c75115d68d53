"""Layering rules a newcomer relies on: the core never imports Streamlit (only explorer/ui does)."""
from __future__ import annotations

import ast

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
    core = [p for p in (ROOT / "explorer").rglob("*.py") if "ui" not in p.relative_to(ROOT / "explorer").parts]
    assert len(core) > 15
    offenders = [str(p.relative_to(ROOT)) for p in core if "streamlit" in imported_modules(p)]
    assert offenders == []


def test_the_ui_package_is_where_streamlit_lives():
    ui = list((ROOT / "explorer" / "ui").rglob("*.py"))
    assert any("streamlit" in imported_modules(p) for p in ui)
