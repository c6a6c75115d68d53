"""A measured run beside the scenario on screen: upload PyTorch profiler (Kineto) traces, one per
rank, and see measured vs simulated per category (the Scenario & files tab).

The traces are measured by explorer/traces (the same code as ``import-trace``); the simulated side
is the view's own cached result, so uploading costs no second simulation.  A file that is not a
trace is one error line naming it.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from ...config.schema import ScenarioError
from ...traces.compare import Comparison, layout_of
from ...traces.load import read_ranks
from ...traces.measure import measure
from ...vocabulary import CATEGORIES, COMM_DIMS
from ..cache import ViewData


def comparison_of(data: ViewData, files: list[tuple[str, bytes]]) -> Comparison:
    """Measure the uploaded ``(name, bytes)`` traces against ``data``'s simulation; ScenarioError
    (one line, naming the file) for anything that is not a usable trace."""
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, blob) in enumerate(files):
            safe = Path(name).name or f"rank{i}.json"
            (Path(tmp) / f"{i:04d}-{safe}").write_bytes(blob)
        try:
            traces = read_ranks(Path(tmp))
        except ScenarioError as exc:      # name the upload, not the temporary copy
            text = re.sub(r"\d{4}-", "", str(exc).replace(str(Path(tmp)) + os.sep, ""), count=1)
            field, _, message = text.partition(": ")
            raise ScenarioError(field if message else "traces", message or text) from None
        try:
            measured = measure(traces, layout_of(data.scenario))
        except ValueError as exc:
            raise ScenarioError("traces", str(exc)) from None
    return Comparison(scenario=data.scenario.name, measured=measured,
                      simulated_iteration_s=data.summary.iteration_time_s,
                      simulated=dict(data.summary.breakdown_s))


def show(c: Comparison) -> None:
    """The table, the bars and the differences of one comparison."""
    m = c.measured
    st.caption(f"{m.ranks} rank(s), {len(m.steps)} iteration(s) (ProfilerStep "
               f"{m.steps[0]}-{m.steps[-1]}), measured on {'GPU kernels' if m.gpu else 'CPU ops'}; each "
               "iteration is its slowest rank's.")
    cols = st.columns(2)
    cols[0].metric("Measured iteration", f"{m.iteration_s * 1e3:.2f} ms")
    cols[1].metric("Simulated iteration", f"{c.simulated_iteration_s * 1e3:.2f} ms")
    cats = [k for k in CATEGORIES if m.categories[k] or c.simulated.get(k, 0.0)]
    rows = [{"category": k, "measured ms": m.categories[k] * 1e3,
             "simulated ms": c.simulated.get(k, 0.0) * 1e3} for k in cats]
    rows.append({"category": "exposed communication", "measured ms": m.exposed_comm_s * 1e3,
                 "simulated ms": c.simulated_exposed_s * 1e3})
    st.dataframe(rows, hide_index=True, key="trace_overlay_table")
    fig = go.Figure([go.Bar(name="measured", x=cats, y=[m.categories[k] * 1e3 for k in cats]),
                     go.Bar(name="simulated", x=cats, y=[c.simulated.get(k, 0.0) * 1e3 for k in cats])])
    fig.update_layout(barmode="group", yaxis_title="ms per iteration", height=320,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10})
    st.plotly_chart(fig, key="trace_overlay_bars")
    for d in c.differences():
        st.markdown(f"- {d}")
    if not any(m.categories[d] for d in COMM_DIMS):
        st.caption("No collective was in flight without compute beside it: no exposed communication.")


def render(data: ViewData) -> None:
    st.subheader("Compare with a measured run")
    files = st.file_uploader("PyTorch profiler traces (Kineto .json / .json.gz, one per rank)",
                             type=["json", "gz"], accept_multiple_files=True, key="_trace_files")
    if not files:
        st.caption("`torch.profiler` with `prof.step()` once per iteration writes them; "
                   "`python -m explorer import-trace DIR --scenario NAME` does the same from the shell.")
        return
    try:
        c = comparison_of(data, [(f.name, f.getvalue()) for f in files])
    except ScenarioError as exc:
        st.error(str(exc))
        return
    show(c)
