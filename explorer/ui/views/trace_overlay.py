"""A measured run beside the scenario on screen: upload PyTorch profiler (Kineto) traces, one per
rank, and see measured vs simulated per category, both iterations as lanes on one time axis, and
fit the scenario's compute efficiency and link rates to them (the Scenario & files tab).

The traces are measured by explorer/traces (the same code as ``import-trace``); the categories'
simulated side is the view's own cached result, the lanes one more (cached) simulation, the fit
``import-trace --fit``'s (explorer/traces/run_fit.py), made on click.  Its constants can be applied
to the view (the share link then carries them) or downloaded as a scenario file.  A file that is
not a trace is one error line naming it.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from ...config.loading import to_yaml
from ...config.schema import ScenarioError
from ...figures.fonts import PRESENT_FONT_PX
from ...figures.trace_lanes import ends_text, lanes_figure
from ...traces.compare import Comparison, layout_of
from ...traces.lanes import Spans, measured_lanes
from ...traces.load import read_ranks
from ...traces.measure import measure
from ...traces.run_fit import RunFit, fitted_scenario
from ...vocabulary import CATEGORIES, COMM_DIMS
from ..cache import ViewData, class_lanes, trace_fit
from ..export import chart
from ..plain import plain
from ..state import load_into_controls


def comparison_of(data: ViewData, files: list[tuple[str, bytes]]) -> Comparison:
    """Measure the uploaded ``(name, bytes)`` traces against ``data``'s simulation; ScenarioError
    (one line, naming the file) for anything that is not a usable trace."""
    return measured_of(data, files)[0]


def measured_of(data: ViewData, files: list[tuple[str, bytes]]) -> tuple[Comparison, Spans]:
    """comparison_of, and the lanes of the first measured iteration's slowest rank."""
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
        layout = layout_of(data.scenario)
        try:
            measured = measure(traces, layout)
        except ValueError as exc:
            raise ScenarioError("traces", str(exc)) from None
    first = measured.per_step[0]
    trace = next(t for i, t in enumerate(traces) if (t.rank if t.rank is not None else i) == first.rank)
    return (Comparison(scenario=data.scenario.name, measured=measured,
                       simulated_iteration_s=data.summary.iteration_time_s,
                       simulated=dict(data.summary.breakdown_s)),
            measured_lanes(trace, first.step, layout))


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


def show_lanes(c: Comparison, measured: Spans, simulated: Spans, present: bool = False) -> None:
    """Both iterations as lanes on one time axis."""
    first = c.measured.per_step[0]
    st.markdown("**Measured and simulated, lane by lane**")
    st.caption(f"Measured: rank {first.rank}, ProfilerStep {first.step} (the slowest rank of the first "
               "iteration), every thread's or stream's compute on one lane. Simulated: the slowest GPU "
               "class, with the transfers it waits for. A collective's lane is its dimension. "
               + ends_text(first.duration_s, c.simulated_iteration_s))
    fig = lanes_figure(measured, first.duration_s, simulated, c.simulated_iteration_s,
                       font_size=PRESENT_FONT_PX if present else 12)
    chart(fig, "trace_overlay_lanes", present, name="measured-vs-simulated")


def show_fit(fit: RunFit) -> None:
    """The fitted constants, the times they reproduce and the residual."""
    rows = [{"field": k, "scenario's": fit.start[k], "fitted": v,
             "note": "at its bound: the trace is beyond its range" if k in fit.at_bound else ""}
            for k, v in fit.fields.items()]
    st.dataframe(rows, hide_index=True, key="trace_fit_fields")
    targets = [{"time in": t.name, "measured ms": t.measured_s * 1e3, "before ms": t.before_s * 1e3,
                "fitted ms": t.after_s * 1e3} for t in fit.targets]
    st.dataframe(targets, hide_index=True, key="trace_fit_targets")
    it = fit.iteration_s
    st.caption(f"RMS error of the fitted times {fit.residual_before:.1%} -> {fit.residual:.1%} "
               f"({fit.simulations} simulations). Iteration: measured {it['measured'] * 1e3:,.2f} ms, "
               f"simulated {it['before'] * 1e3:,.2f} ms before, {it['after'] * 1e3:,.2f} ms after.")


def _fit_section(data: ViewData, raw_json: str, c: Comparison, key: tuple) -> None:
    st.markdown("**Calibrate to this trace**")
    if st.session_state.get("_trace_fit_for") != key:
        if st.button("Fit compute efficiency and link rates", key="_trace_fit_button",
                     help="Solves the scenario's GEMM efficiency and each crossed tier's rate so the "
                          "simulation computes and communicates as long as the trace does "
                          "(python -m explorer import-trace ... --fit)"):
            st.session_state["_trace_fit_for"] = key
            st.rerun()
        return
    try:
        with st.spinner("Fitting (about a dozen simulations)..."):
            fit = trace_fit(raw_json, key, c.measured)
    except ValueError as exc:
        st.error(f"traces: {plain(str(exc))}")
        return
    show_fit(fit)
    fitted = fitted_scenario(data.scenario, fit)
    cols = st.columns(2)
    cols[0].button("Apply the fitted constants", key="_trace_fit_apply", on_click=load_into_controls,
                   args=(fitted,), help="Sets them in the sidebar; the share link then carries them")
    cols[1].download_button("Download the calibrated scenario (YAML)", data=to_yaml(fitted),
                            file_name="calibrated.yaml", mime="application/x-yaml", key="_trace_fit_yaml")


def render(data: ViewData, raw_json: str | None = None, present: bool = False) -> None:
    st.subheader("Compare with a measured run")
    files = st.file_uploader("PyTorch profiler traces (Kineto .json / .json.gz, one per rank)",
                             type=["json", "gz"], accept_multiple_files=True, key="_trace_files")
    if not files:
        st.caption("`torch.profiler` with `prof.step()` once per iteration writes them; "
                   "`python -m explorer import-trace DIR --scenario NAME` does the same from the shell.")
        return
    try:
        c, lanes = measured_of(data, [(f.name, f.getvalue()) for f in files])
    except ScenarioError as exc:
        st.error(plain(str(exc)))
        return
    show(c)
    if raw_json is None:
        return
    show_lanes(c, lanes, class_lanes(raw_json), present)
    _fit_section(data, raw_json, c, tuple((f.name, f.size) for f in files))
