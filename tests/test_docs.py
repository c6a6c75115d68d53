"""The README documents every scenario field and names the test command CI runs."""
from __future__ import annotations

from explorer.scenario import SETTABLE

from conftest import ROOT


def test_readme_lists_every_scenario_field():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [k for k, f in SETTABLE.items() if not f.metadata.get("derived") and f"`{k}`" not in readme]
    assert missing == []


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q" in readme and "python -m pytest -q" in ci


def test_readme_field_table_is_the_schema():
    """Defaults, valid ranges (physical bounds) and meanings in the README come from the schema."""
    from explorer.config.docs import field_table
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert field_table() in readme, \
        "README's field table is stale: paste the output of python -m explorer.docs"
