"""The placement advisor in the app's Design-space view (issue 12.5): on a scenario over two
datacenters a button ranks the placements as `python -m explorer advise` does, each row a link."""
from __future__ import annotations

import pytest

from explorer.design.advise import advise
from explorer.design.base import open_base

from app_support import run_app


@pytest.mark.slow
def test_advisor_ranks_placements_with_links():
    at = run_app(scenario="two-datacenters", view="design")
    button = next(b for b in at.button if b.key == "_d_advise")
    button.click().run()
    assert not at.exception
    frames = [df for df in at.dataframe if "placement" in df.value.columns]
    assert frames, "no placement table"
    table = frames[0].value
    cli = advise(open_base("two-datacenters"), 8)
    assert list(table["iteration (s)"])[:3] == [a.iteration_time_s for a in cli.top[:3]]
    assert all(str(u).startswith("?") or "scenario=" in str(u) for u in table["open"])
    assert any("for the naive placement" in c.value for c in at.caption)


def test_no_advisor_in_one_datacenter():
    at = run_app(scenario="teaching-8gpu", view="design")
    assert not [b for b in at.button if b.key == "_d_advise"]
