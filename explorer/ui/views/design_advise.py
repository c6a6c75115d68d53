"""The Design-space view's placement advisor (issue 12.5): for a scenario over several datacenters,
every placement (which dimensions cross, stages per datacenter, flat or hierarchical DP, schedule)
ranked as ``python -m explorer advise`` ranks it (explorer/design/advise.py), each row a link that
opens that placement, the best against the naive one (DP flat across everything)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from ...analysis.verdict import DEFAULT_HEADROOM_GB
from ...design.advise import advise
from . import design_runs as runs

DEFAULT_TOP = 8


def _ms(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def render(base: runs.Base, raw_json: str, present: bool, href: Callable[[str | None], str | None],
           columns: dict[str, Any], head: Callable[[str, bool], None]) -> None:
    """The advisor, for a scenario of two or more datacenters (nothing otherwise)."""
    sc = base.scenario()
    if sc.cluster.datacenters < 2:
        return
    head(f"Placements across {sc.cluster.datacenters} datacenters", present)
    key = ("advise", raw_json, base.shipped)
    run = runs.lookup(key)
    if run is None and st.button("Rank placements", key="_d_advise", type="primary", icon=":material/hub:",
                                 help="Every placement ranked by the estimator, the best re-simulated"):
        with st.spinner("Ranking placements…"):
            # Placements the estimator leaves to the full simulation (datacenters of different GPUs)
            # take about 0.3 s each: the bar counts them.
            bar = st.progress(0.0, text="starting…")

            def update(done: int, total: int) -> None:
                bar.progress(min(1.0, done / max(total, 1)), text=f"{done:,} of {total:,} placements")

            run = runs.cached(key, lambda: advise(base, DEFAULT_TOP, runs.IN_PROCESS, update))
            bar.empty()
    if run is None:
        st.caption("Which dimensions cross the WAN (span dp, pp or dp+pp), how many pipeline stages per "
                   "datacenter, flat, hierarchical or MPI data parallelism, and every schedule — ranked by "
                   "the estimator, the fastest re-simulated on the full engine. Press the button to start.")
        return
    naive = run.naive.iteration_time_s if run.naive else None
    marks = lambda a: (" (yours)" if a.own else "") + (" (naive)" if a.naive else "")   # noqa: E731
    rows = [{"#": i + 1, "placement": a.label + marks(a),
             "iteration (s)": a.iteration_time_s,
             "vs naive": (naive / a.iteration_time_s) if naive else None,
             "open": href(a.link)} for i, a in enumerate(run.top)]
    st.dataframe(rows, hide_index=True, column_config={
        **columns, "#": st.column_config.NumberColumn(width=28),
        "placement": st.column_config.TextColumn(width="large"),
        "vs naive": st.column_config.NumberColumn(format="%.2fx",
                                                  help="the naive placement's time over this one")})
    best = run.best
    if run.top and best is None:
        st.caption(f"**{run.enumerated:,}** placements · **{run.valid:,}** valid · **{run.fit:,}** fit · "
                   f"none leaves the {DEFAULT_HEADROOM_GB:g} GB a GPU needs beside the model: none is "
                   "recommended (the table lists those that fit).")
    if best is not None and naive:
        st.caption(f"**{run.enumerated:,}** placements · **{run.valid:,}** valid · **{run.fit:,}** fit · "
                   f"best {_ms(best.iteration_time_s)} against {_ms(naive)} for the naive placement (DP flat "
                   f"across everything): **{naive / best.iteration_time_s:.2f}x**. Each row opens its "
                   "placement.")
