"""The Design-space tab: the scenario of the sidebar (A) among its neighbours.

Four panels, each computed by explorer/design through views/design_runs.py and cached for all
sessions: a heatmap of iteration time or MFU over two chosen fields (a sweep on the estimator),
the tornado of 2x upgrades (sensitivity), the fastest layouts that fit (search, on a button), and
the weak or strong scaling curve.  Every cell, bar, point and row has the share link of its
scenario: click a cell, bar or point to get it, and the tables (the search's own, the others in
expanders under their charts) link every row.  Work runs with a progress display, and what is
estimated to take more than a few seconds waits for a button.  The heatmap's fields, values and
metric and the scaling mode are part of the page's link (views/design_state.py).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st

from ...analysis.verdict import DEFAULT_HEADROOM_GB, MAX_HEADROOM_GB
from ...design import estimator_available
from ...design.search import TIMED_PIPELINES
from ...design.space import REFINE
from ...figures import design as dfig
from ...scenario import ScenarioError
from ...workloads.registry import workload_for
from ..cache import ViewData
from ..errors import internal_error
from ..export import chart
from ..plain import plain
from ..widget_defaults import index_of, text_of
from . import design_advise
from . import design_runs as runs
from . import design_search as searching
from .design_state import FIELDS, KEYS, METRICS, MODES, init_state, link_params, on_field

__all__ = ["link_params", "render"]       # page.py writes link_params() into the address bar

CHART = {"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def _href(query: str | None) -> str | None:
    """The share query string as an absolute link (like page.share_link)."""
    if not query:
        return None
    return f"{(st.context.url or '').split('?')[0]}?{query}"


# --- Shared pieces -------------------------------------------------------------------------------
@contextmanager
def _progress(slot: Any, label: str, unit: str, then: str = "") -> Iterator[Callable[[int, int], None]]:
    """A status box in ``slot`` (an st.empty) with a progress bar while the block runs, removed
    after it; yields the library's ``progress(done, total)``.  ``then`` says what follows the
    last item (the search's full-engine phase)."""
    with slot.status(label, expanded=True):
        bar = st.progress(0.0, text="starting…")

        def update(done: int, total: int) -> None:
            text = f"{done:,} of {total:,} {unit}" + (f"; {then}" if then and done >= total else "")
            bar.progress(min(1.0, done / max(total, 1)), text=text)

        yield update
    slot.empty()


def _guard(what: str, fn: Callable[..., None], *args: Any) -> None:
    """Run one panel; a bad input is one line, anything unexpected an id (ui/errors.py)."""
    try:
        fn(*args)
    except ScenarioError as exc:
        st.error(f"{what}: {plain(str(exc))}", icon="⚠️")
    except Exception:  # noqa: BLE001 - one panel's bug must not take the others down
        internal_error(f"computing the {what.lower()}")


def _run(key: tuple, cost_s: float, button: str, label: str, compute: Callable[[Any], Any],
         unit: str = "") -> Any | None:
    """The cached result of ``key``; else ``compute(progress)`` now when estimated cheap
    (AUTO_SECONDS) or when the button is pressed, with a progress bar counting ``unit`` (a
    spinner without one), else None after drawing the button."""
    slot = st.empty()          # always there, so the elements below keep their places between runs
    got = runs.lookup(key)
    if got is not None:
        return got
    if cost_s > runs.AUTO_SECONDS and not st.button(f"{button} (about {cost_s:,.0f} s)",
                                                    key=f"_d_run_{key[0]}"):
        return None
    with _progress(slot, label, unit) if unit else slot.status(label) as progress:
        got = runs.cached(key, lambda: compute(progress if unit else None))
    slot.empty()
    return got


def _selected(event: Any) -> dict[str, Any] | None:
    """The first point a chart's selection holds, or None."""
    try:
        points = event.selection.points
    except AttributeError:
        return None
    return points[0] if points else None


def _link_line(text: str, query: str | None) -> None:
    href = _href(query)
    if href:
        st.markdown(f"**{text}** — [open this scenario ↗]({href})")


def _head(text: str, present: bool) -> None:
    st.markdown(f"{'####' if present else '#####'} {text}")


# --- Panels --------------------------------------------------------------------------------------
def _axes(box: Any) -> None:
    """The heatmap's controls, in ``box`` (a row above the charts, or presentation's popover)."""
    with box:
        cols = st.columns([3, 2, 3, 2, 2], gap="small", vertical_alignment="bottom")
        # Each with its current value as its default: presentation's popover mounts them only when
        # opened, after later runs (explorer/ui/widget_defaults.py; a hunt found the axes both tp).
        cols[0].selectbox("Heatmap x axis", FIELDS, index=index_of(FIELDS, KEYS["x"]), key=KEYS["x"],
                          on_change=on_field, args=("x",),
                          help="Any scenario field (dotted key); its values are prefilled")
        cols[1].text_input("x values", value=text_of(KEYS["xv"]), key=KEYS["xv"],
                           help="Comma-separated YAML values, e.g. 1,2,4,8",
                           on_change=st.session_state.__setitem__, args=("_d_warnings", []))
        cols[2].selectbox("Heatmap y axis", FIELDS, index=index_of(FIELDS, KEYS["y"]), key=KEYS["y"],
                          on_change=on_field, args=("y",))
        cols[3].text_input("y values", value=text_of(KEYS["yv"]), key=KEYS["yv"],
                           on_change=st.session_state.__setitem__, args=("_d_warnings", []))
        cols[4].selectbox("Colour by", tuple(METRICS), index=index_of(tuple(METRICS), KEYS["m"]),
                          key=KEYS["m"], format_func=METRICS.__getitem__)


def _grid() -> runs.Grid:
    """The grid the controls describe (a one-line ScenarioError when they do not describe one)."""
    ss = st.session_state
    x, y = ss[KEYS["x"]], ss[KEYS["y"]]
    if x == y:
        raise ScenarioError(y, "is on both axes; pick two different fields")
    xs, ys = runs.parse_values(x, ss[KEYS["xv"]]), runs.parse_values(y, ss[KEYS["yv"]])
    return runs.Grid(x, tuple(xs), y, tuple(ys))


def _heatmap(base: runs.Base, raw_json: str, present: bool) -> None:
    ss = st.session_state
    metric = ss[KEYS["m"]]
    short = {k: ss[KEYS[k]].rpartition(".")[2] for k in ("x", "y")}
    with st.container(horizontal=True, vertical_alignment="bottom"):
        _head(f"{METRICS[metric]} over {short['x']} × {short['y']}", present)
        if present:
            _axes(st.popover("Axes", icon=":material/tune:"))
    try:
        grid = _grid()
    except ScenarioError as exc:
        st.error(f"Heatmap: {plain(str(exc))}", icon="⚠️")
        return
    swept, dropped = runs.sweep_base(base, grid)
    res = _run(grid.key(raw_json, base.shipped or ""), grid.cells * runs.per_config_seconds(raw_json),
               f"Run the sweep ({grid.cells} combinations)", f"Sweeping {grid.cells} combinations…",
               lambda progress: runs.run_sweep(swept, grid, progress), "combinations")
    if res is None:
        return
    fig = dfig.heatmap(res.points, grid.x, grid.y, metric, height=300 if present else 380,
                       font_size=15 if present else 12, current=runs.current_cell(base, grid))
    runs.cell_overlay(fig, res.points, grid, metric, 14 if present else 11)
    event = chart(fig, key="_d_heatmap", present=present, config=CHART, on_select="rerun",
                  selection_mode="points")
    point = _selected(event)
    data = point.get("customdata") if point is not None else None
    if isinstance(data, list) and data and data[0]:
        cell = data[1].split("<br>")
        _link_line(f"{cell[0]}, {cell[1]}", data[0])
    valid = len(res.valid)
    # A family the estimator does not price (registry: estimator=False) has its rows simulated.
    sc = st.session_state.get("_d_scenario")
    priced = sc is None or workload_for(sc.model).estimator
    engine = "estimator" if estimator_available() and priced else "full engine"
    st.caption(f"{valid} of {grid.cells} combinations valid ({engine}, {res.seconds:.2f} s); grey ⚠ = does "
               "not fit in memory (never coloured as a result); outlined = this scenario; hover an invalid "
               "cell for why, click a cell for its link"
               + ("; the scenario's layer split is dropped while pp varies" if dropped else "")
               + (f"; this scenario never reads {', '.join(res.unread)} (one datacenter or one NVLink "
                  "domain): equal along that axis" if res.unread else "") + ".")
    if not present:
        with st.expander("Every cell, with its link"):
            st.dataframe(runs.cell_rows(res.points, grid, _href), hide_index=True,
                         column_config=_LINK_COLUMNS)


_LINK_COLUMNS = {"open": st.column_config.LinkColumn("open", display_text="open ↗", width=62),
                 "iteration (s)": st.column_config.NumberColumn(format="%.4g"),
                 "MFU (%)": st.column_config.NumberColumn(format="%.1f"),
                 "memory (GB)": st.column_config.NumberColumn(format="%.1f")}


def _tornado(base: runs.Base, raw_json: str, present: bool) -> None:
    _head("Which 2× upgrade buys the most", present)
    got = _run(("sens", raw_json, base.shipped), 9 * runs.exact_seconds(raw_json), "Run the sensitivity",
               "Scoring 8 upgrades…", lambda _: runs.run_sensitivity(base))
    if got is None:
        return
    note = got.result.memory_note()
    if note:
        st.warning(f"Memory: {note}.", icon="⚠️")
    fig = dfig.tornado(got.result, height=330 if present else 380, font_size=15 if present else 12)
    event = chart(fig, key="_d_tornado", present=present, config=CHART, on_select="rerun",
                  selection_mode="points")
    point = _selected(event)
    if point is not None and point.get("y") in got.links:
        _link_line(str(point["y"]), got.links[point["y"]])
    st.caption("The full engine's figures; bar = share of the iteration saved, label = speedup. Click a bar "
               "for its link.")
    reasons: dict[str, list[str]] = {}
    for k in got.result.skipped:                  # changes this scenario cannot express
        reasons.setdefault(k.reason, []).append(k.change)
    for why, names in reasons.items():
        st.caption(f"Not run: {', '.join(names)} — {why}")
    if not present:
        with st.expander("Every upgrade, with its link"):
            st.dataframe([{"change": r.change, "iteration (s)": r.iteration_time_s, "speedup": r.speedup,
                           "open": _href(got.links[r.change])} for r in got.result.rows],
                         hide_index=True, column_config={
                             **_LINK_COLUMNS, "speedup": st.column_config.NumberColumn(format="%.3fx")})


def _search(base: runs.Base, raw_json: str, query: dict[str, str], present: bool) -> None:
    sc = base.scenario()
    _head(f"Fastest layouts of this model on {sc.gpus:,} GPUs that fit", present)
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        st.number_input("Top", min_value=1, max_value=20, value=searching.DEFAULT_TOP, key="_d_top",
                        width=110)
        st.selectbox("Depth", tuple(searching.DEPTHS), key="_d_depth", width=150,
                     format_func=lambda d: {"quick": "quick (~5 s)", "thorough": "thorough (~30 s)",
                                            "exhaustive": "every layout"}[d],
                     help="How long the search may take; a shorter one searches a narrowed layout space")
        st.number_input("Headroom (GB)", min_value=0.0, max_value=MAX_HEADROOM_GB, value=DEFAULT_HEADROOM_GB,
                        step=1.0, format="%.1f", key="_d_headroom", width=130,
                        help="Memory a ranked layout must leave free on each GPU for what the model does "
                             "not count: the CUDA context, NCCL's buffers (0.5-0.7 GB per communicator, "
                             "NVIDIA/nccl#964) and allocator fragmentation")
        st.toggle("Placements & layer splits", key="_d_refine",
                  help="Also search the rank placement (parallelism.order: which dimension is innermost, "
                       "on NVLink) and per-stage layer splits (parallelism.pipeline_layout) of the "
                       f"{REFINE} best layouts, as Pipette and Galvatron do")
        pressed = st.button("Search layouts", key="_d_search", type="primary", icon=":material/search:")
    top, depth = int(st.session_state["_d_top"]), st.session_state["_d_depth"]
    headroom, refine = float(st.session_state["_d_headroom"]), bool(st.session_state.get("_d_refine"))
    key = ("search", raw_json, base.shipped, top, depth, headroom, refine)
    slot = st.empty()
    run = runs.lookup(key)
    if run is None and pressed:
        with _progress(slot, "Searching layouts: validating and estimating…", "layouts",
                       "pricing the fastest exactly…") as progress:
            run = runs.cached(key, lambda: searching.run_search(base, raw_json, top, depth, headroom,
                                                                progress, refine))
    if run is None:
        st.caption("Every layout (tp, pp, cp, ep, dp, schedule, vpp, ZeRO, micro-batch, recompute, sequence "
                   "parallel) of this model, batch and cluster is validated; those that fit with "
                   f"{headroom:g} GB to spare are ranked by the estimator and the fastest priced exactly. "
                   "Press the button to start.")
        return
    res, plan = run.result, run.plan
    if not res.top:
        st.warning(f"No layout fits with {res.headroom_GB:g} GB to spare"
                   + (f" ({res.fit:,} fit with less: lower the headroom to rank them)." if res.fit else "."),
                   icon="⚠️")
    else:
        verdict = res.verdict()
        (st.success if res.top[0].baseline else st.info)(verdict[0].upper() + verdict[1:] + ".")
    table, ms = searching.table_rows(res, _href)
    column = st.column_config
    height = min(len(table), 5 if present else 10) * 35 + 38
    st.dataframe(table, hide_index=True, height=height, column_config={
        **_LINK_COLUMNS, "#": column.NumberColumn(width=28), "layout": column.TextColumn(width="large"),
        "GB": column.NumberColumn("GB", format="%.1f", width=50, help="memory per GPU"),
        "free": column.NumberColumn("free", format="%.1f", width=50, help="GB left free on each GPU"),
        "MFU (%)": column.NumberColumn("MFU", format="%.1f%%", width=56),
        "iteration": column.NumberColumn("ms" if ms else "s", format="%.1f" if ms else "%.3f", width=60,
                                         help="iteration time, priced exactly")})
    ranker = "the estimator" if res.engine == "estimate" else "the full engine (no estimator installed)"
    shown = st.session_state.get("_d_scenario")
    family = workload_for(shown.model) if shown is not None else None
    if family is not None and not family.estimator:
        # Its rows are simulated (registry: estimator=False); "estimator" would misname them.
        ranker = f"simulation (the estimator does not price a {family.name} model)"
    timed = (f" (**{res.unscored:,}** latency-timed ones not scored: only on the {TIMED_PIPELINES} fastest "
             f"fitting 1F1B pipelines)") if res.unscored else ""
    on_proxy = " (on the proxy)" if res.proxy else ""
    refined = (f" (**{res.refined:,}** of them placements / layer splits of the {REFINE} best)"
               if res.refined else "")
    st.caption(f"**{res.enumerated:,}** layouts enumerated{refined}{timed} · **{res.valid:,}** valid · "
               f"**{res.fit:,}** fit in memory{on_proxy}, **{res.roomy:,}** with {res.headroom_GB:g} GB to "
               "spare · "
               f"ranked by {ranker}, the top {len(res.top)} priced exactly · **{run.seconds:.1f} s** "
               f"(planned about {searching.planned_text(plan.seconds)}). Each row opens its scenario.")
    if res.proxy:
        st.caption(f"The estimator does not price this scenario as it is: its layouts were ranked on a "
                   f"proxy ({'; '.join(res.proxy)}) and the best {res.simulated} simulated in full as the "
                   "scenario is (the times above are those).")
    if plan.narrowed:
        command = searching.cli_command(base.shipped or "", query, top)
        st.caption(f"To finish in about {searching.DEPTHS[depth] or 0:g} s, the {depth} search covered "
                   f"{plan.layouts:,} of the {plan.full_layouts:,} layouts: {'; '.join(plan.narrowed)}. "
                   f"All of them: depth *every layout*, or `{command}`.")


def _scaling(base: runs.Base, raw_json: str, present: bool) -> None:
    _head("Scaling: iteration time, MFU, exposed communication", present)
    st.segmented_control("Scaling", MODES, key=KEYS["scale"], label_visibility="collapsed",
                         default=st.session_state.get(KEYS["scale"]),
                         help="weak: the global batch grows with the GPUs; strong: it stays fixed")
    mode = st.session_state.get(KEYS["scale"]) or "weak"
    sizes = runs.scaling_sizes(base.scenario())
    got = _run(("scale", raw_json, base.shipped, mode), 3 * len(sizes) * runs.exact_seconds(raw_json),
               "Run the scaling curve", f"Scoring {len(sizes)} cluster sizes…",
               lambda _: runs.run_scaling(base, mode))
    if got is None:
        return
    fig = dfig.scaling_curve(got, height=400 if present else 440, font_size=15 if present else 12)
    event = chart(fig, key="_d_scaling", present=present, config=CHART, on_select="rerun",
                  selection_mode="points")
    point = _selected(event)
    links = {p.gpus: p.link for p in got if p.valid}
    if point is not None and point.get("x") in links:
        _link_line(f"{point['x']:,} GPUs ({mode} scaling)", links[point["x"]])
    left_out = runs.left_out(got)
    over = [p for p in got if p.valid and not p.fits]
    st.caption("The full engine's figures; the extra GPUs are data-parallel replicas. Click a point for its "
               "link." + (f" Left out: {plain(left_out)}." if left_out else "")
               + (f" Crossed out: {', '.join(f'{p.gpus:,}' for p in over)} GPUs, over the GPU's memory — "
                  "they cannot run this layout as set." if over else ""))
    if not present:
        with st.expander("Every size, with its link"):
            st.dataframe([{"GPUs": p.gpus, "dp": p.dp, "global batch": p.global_batch,
                           "iteration (s)": p.figures.get("iteration_time_s"),
                           "MFU (%)": 100 * p.figures["mfu"] if p.valid else None,
                           "memory (GB)": p.figures.get("memory_GB_total"),
                           "status": _scaling_status(p), "open": _href(p.link)} for p in got],
                         hide_index=True, column_config=_LINK_COLUMNS)


def _scaling_status(p: runs.ScalePoint) -> str:
    """A size's row status: ok, over the GPU's memory (it cannot run as laid out), or why invalid."""
    if not p.valid:
        return p.reason or "invalid"
    if not p.fits:
        return (f"over memory: {p.figures['memory_GB_total']:.1f} of "
                f"{p.figures.get('memory_capacity_GB', float('nan')):.1f} GB")
    return "ok"


# --- The tab -------------------------------------------------------------------------------------
def render(data: ViewData, raw_json: str, query: dict[str, str], present: bool) -> None:
    """The tab for A (``data``, cached under ``raw_json``); ``query`` is the page's share link."""
    sc = data.scenario
    ss = st.session_state
    ss["_d_scenario"] = sc
    view = ss["_view"]
    init_state(view.design, sc)
    for w in ss.get("_d_warnings") or []:
        st.warning(f"Link: {plain(w)}", icon="⚠️")
    base = runs.make_base(json.loads(raw_json), ss["_scenario"], sc.name)
    if not present:
        _axes(st.container())
    # The heatmap beside the search (the two a user comes for), then the upgrades beside scaling.
    left, right = st.columns([4, 5], gap="medium")
    with left:
        _guard("Heatmap", _heatmap, base, raw_json, present)
    with right:
        _guard("Search", _search, base, raw_json, query, present)
    _guard("Placement advisor", design_advise.render, base, raw_json, present, _href, _LINK_COLUMNS, _head)
    left, right = st.columns(2, gap="medium")
    with left:
        _guard("Sensitivity", _tornado, base, raw_json, present)
    with right:
        _guard("Scaling curve", _scaling, base, raw_json, present)
    if not present:
        with st.expander("How to read this"):
            st.markdown(HOW_TO_READ)


HOW_TO_READ = (
    "- Everything here starts from the scenario of the sidebar, and every cell, bar, point and row "
    "has the share link of its own scenario: click a chart for it, or open the tables.\n"
    "- **Heatmap**: the sweep of two fields (any field, any values) on the estimator — "
    "`python -m explorer sweep SCENARIO --vary ...` gives the same numbers. A cell marked *invalid* "
    "breaks a rule: hover it for the loader's reason. ⚠ marks a layout over the GPU's memory.\n"
    "- **Layouts**: the search validates every layout of this model on these GPUs, ranks those that "
    "fit with the headroom to spare (1 GB by default: CUDA context, fragmentation) by "
    "the estimator and prices the fastest exactly; *yours* marks the sidebar's own layout, which "
    "competes whenever it fits. A quick search narrows a big space and says how; "
    "`python -m explorer search` searches all of it.\n"
    "- **Upgrades**: the iteration after doubling compute, HBM bandwidth or one network tier's "
    "bandwidth, or halving a latency (the full engine's figures). A tier the scenario never crosses "
    "saves nothing.\n"
    "- **Scaling**: more GPUs as data-parallel replicas; weak scaling keeps each GPU's batch, strong "
    "scaling the global batch.")
