"""CommExplorer — the Streamlit app: change the scenario, see the timeline and the bottleneck.

Streamlit only: widgets, the address bar <-> scenario, cached calls into the core, layout.  All
physics lives in ``explorer/``; this file never computes a time.

State: the sidebar widgets are keyed by the scenario field they set (``parallelism.pp``), and the
address bar always holds ``scenario=<preset>`` plus every field that differs from it, the view and
presentation mode — so the address bar is the share link.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import streamlit as st
import yaml

from explorer import figures
from explorer.scenario import (Scenario, ScenarioError, apply_overrides, from_dict, gpu_presets,
                               model_presets, parse_text, to_dict, to_yaml)
from explorer.schema import field_paths
from explorer.share import (SharedView, changed_fields, flatten, parse_query,
                            preset_raw, shipped_scenarios, to_query)

MAX_BARS = 2500          # SVG bars drawn at most; more are aggregated (figures.gantt)
VIEW_LABELS = {"timeline": "Timeline", "memory": "Memory", "topology": "Topology", "scenario": "Scenario & files"}
FIELDS = field_paths(Scenario)
CUSTOM = "(custom)"

# Sidebar: (section, [(key, label, kind)]) — kind: int | float | choice | bool | order | dp
SECTIONS: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("Parallelism", [("parallelism.tp", "Tensor parallel (tp)", "int"), ("parallelism.pp", "Pipeline stages (pp)", "int"),
                     ("parallelism.dp", "Data parallel (dp)", "dp"), ("parallelism.cp", "Context parallel (cp)", "int"),
                     ("parallelism.ep", "Expert parallel (ep)", "int"), ("parallelism.vpp", "Virtual stages (vpp)", "int"),
                     ("parallelism.schedule", "Pipeline schedule", "choice"), ("parallelism.zero", "ZeRO stage", "int"),
                     ("parallelism.sequence_parallel", "Sequence parallel", "bool"),
                     ("parallelism.token_slices", "Token slices per sequence (TeraPipe)", "int"),
                     ("parallelism.order", "Placement order (innermost first)", "order")]),
    ("Scale-up (NVLink)", [("cluster.scale_up.kind", "Kind", "choice"),
                           ("cluster.scale_up.bandwidth_GBps", "Bandwidth per GPU (GB/s)", "float"),
                           ("cluster.scale_up.latency_us", "Latency (µs)", "float")]),
    ("Scale-out (fabric)", [("cluster.scale_out.kind", "Wiring", "choice"),
                            ("cluster.scale_out.nic_Gbps", "NIC speed (Gb/s)", "float"),
                            ("cluster.scale_out.nics_per_node", "NICs per node", "int"),
                            ("cluster.scale_out.latency_us", "Latency (µs)", "float"),
                            ("cluster.scale_out.oversubscription", "Oversubscription (x:1)", "float")]),
    ("Scale-across (WAN)", [("cluster.scale_across.bandwidth_Gbps", "WAN bandwidth (Gb/s)", "float"),
                            ("cluster.scale_across.latency_ms", "WAN latency (ms)", "float")]),
    ("GPUs & cluster", [("hardware.gpu", "GPU", "gpu"), ("cluster.nodes", "Nodes", "int"),
                        ("cluster.gpus_per_node", "GPUs per node", "int"),
                        ("cluster.datacenters", "Datacenters", "int")]),
    ("Model", [("model.preset", "Model preset", "model"), ("model.layers", "Layers", "int"),
               ("model.hidden", "Hidden size", "int"), ("model.heads", "Attention heads", "int"),
               ("model.kv_heads", "KV heads", "int"), ("model.ffn_hidden", "FFN width", "int"),
               ("model.ffn_kind", "FFN kind", "choice"), ("model.seq_len", "Sequence length", "int"),
               ("model.vocab", "Vocabulary", "int"), ("model.moe.experts", "MoE experts (0 = dense)", "int"),
               ("model.moe.top_k", "MoE top-k", "int"), ("model.moe.expert_ffn_hidden", "MoE expert width", "int"),
               ("model.moe.max_nodes", "MoE node limit (0 = none)", "int"),
               ("model.moe.imbalance", "MoE load imbalance (max/mean)", "float")]),
    ("Batch & precision", [("training.global_batch", "Global batch (sequences)", "int"),
                           ("training.micro_batch", "Micro-batch", "int"), ("training.dtype", "Precision", "choice"),
                           ("training.recompute", "Activation recompute", "choice")]),
    ("Communication", [("communication.algorithm", "Collective algorithm", "choice"),
                       ("communication.dp_overlap", "Overlap DP with backward", "bool"),
                       ("communication.bucket_MB", "Gradient bucket (MB)", "float"),
                       ("communication.dp_priority", "Prioritise first layers' buckets (P3)", "bool"),
                       ("communication.tp_overlap", "Overlap TP with GEMMs", "bool"),
                       ("communication.prefetch_layers", "ZeRO-3 prefetch (layers)", "int")]),
]
WIDGET_KEYS = [k for _, items in SECTIONS for k, _, kind in items if kind != "dp"]
ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-cp-pp-dp", "tp-pp-cp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp",
          "tp-cp-dp-pp", "dp-tp-cp-pp", "pp-tp-cp-dp"]


def section_of(field: str) -> str:
    """Which sidebar section shows the error for ``field``."""
    for name, items in SECTIONS:
        if any(field == k or field.startswith(k + ".") for k, _, _ in items):
            return name
    prefix = field.split(".")[0]
    return {"model": "Model", "training": "Batch & precision", "hardware": "GPUs & cluster",
            "parallelism": "Parallelism", "communication": "Communication"}.get(prefix, "Model")


# ------------------------------------------------------------------------------------------------
# Core calls (cached; the cache key is the scenario as JSON, so identical scenarios share results)
# ------------------------------------------------------------------------------------------------
@st.cache_data(max_entries=48, show_spinner=False)
def simulate_cached(raw_json: str) -> dict[str, Any]:
    from explorer.simulate import simulate
    from explorer.timeline import build_timeline
    from explorer.topology import Fabric

    sc = from_dict(json.loads(raw_json))
    res = simulate(sc)
    labels = tuple(c.label for c in res.classes)
    # Per-layer bars when they fit the budget, else one bar per pass and part (the full table is
    # rebuilt only when a download asks for it: see full_timeline).
    draw = build_timeline(res.tasks, labels, max_segments=MAX_BARS)
    full_rows = len(draw) if not draw.coarse else sum(
        max(len(t.parts), 1) * (t.info or {}).get("layers", 1) for t in res.tasks if t.duration > 0)
    return {"json": res.to_json_dict(), "labels": labels, "draw": draw.columns, "draw_rows": len(draw),
            "full_rows": full_rows,
            "memory": [m.as_GB() for m in res.memory_by_class], "utilisation": res.utilisation,
            "leaf_nodes": Fabric.for_cluster(sc.cluster).leaf_nodes, "yaml": to_yaml(sc)}


@st.cache_data(max_entries=4, show_spinner=False)
def full_timeline(raw_json: str):
    """Every operation of the iteration (for the trace and CSV downloads)."""
    from explorer.simulate import simulate
    from explorer.timeline import build_timeline

    res = simulate(from_dict(json.loads(raw_json)))
    return build_timeline(res.tasks, tuple(c.label for c in res.classes), max_segments=10**9)


@st.cache_data(max_entries=48, show_spinner=False)
def gantt_cached(raw_json: str, present: bool) -> tuple[Any, Any]:
    """The Gantt figure of a scenario, built once (it is the most expensive element to rebuild)."""
    res = simulate_cached(raw_json)
    return figures.gantt(res["draw"], res["labels"], res["json"]["iteration_time_s"], max_bars=MAX_BARS,
                         height=500 if present else None, font_size=16 if present else 12)


@st.cache_data(max_entries=16, show_spinner=False)
def preset_scenario(name: str) -> tuple[dict, Scenario]:
    raw = preset_raw(name)
    return raw, from_dict(raw)


# ------------------------------------------------------------------------------------------------
# State
# ------------------------------------------------------------------------------------------------
def widget_values(sc: Scenario) -> dict[str, Any]:
    """The value every sidebar widget shows for scenario ``sc`` (presets by name)."""
    flat = flatten(to_dict(sc))
    values = {key: flat.get(key) for key in WIDGET_KEYS}
    values["model.preset"] = sc.model.preset or CUSTOM
    values["hardware.gpu"] = sc.hardware.gpu.preset or CUSTOM
    return values


def set_widgets(sc: Scenario) -> None:
    st.session_state.update(widget_values(sc))


def on_preset_change() -> None:
    name = st.session_state["_scenario"]
    st.session_state["_extra"] = {}
    st.session_state["_warnings"] = []
    set_widgets(preset_scenario(name)[1])


def on_model_preset_change() -> None:
    name = st.session_state["model.preset"]
    if name == CUSTOM:
        return
    m = from_dict({"model": {"preset": name}, "training": {"global_batch": 1}}).model
    for k in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_kind", "seq_len", "vocab"):
        st.session_state[f"model.{k}"] = getattr(m, k)


def init_state() -> None:
    """First run of a browser session: the link decides everything."""
    view = parse_query(dict(st.query_params))
    st.session_state["_scenario"] = view.scenario
    st.session_state["_view"] = view
    st.session_state["_warnings"] = list(view.warnings)
    base_raw, _ = preset_scenario(view.scenario)
    sc = from_dict(apply_overrides(base_raw, view.overrides))
    set_widgets(sc)
    # Fields a link may set that have no widget (stage_layers, MoE sizes, ...) ride along.
    st.session_state["_extra"] = {k: v for k, v in view.overrides.items() if k not in WIDGET_KEYS}
    st.session_state["_last_good"] = None
    st.session_state["_link_json"] = None
    st.session_state["_init"] = True


def current_raw() -> dict[str, Any]:
    """The scenario the widgets describe, as a raw mapping (only what differs from the preset)."""
    base_raw, base_sc = preset_scenario(st.session_state["_scenario"])
    raw = apply_overrides(base_raw, st.session_state.get("_extra", {}))
    base_values = widget_values(base_sc)
    overrides = {}
    for key in WIDGET_KEYS:
        value = st.session_state.get(key)
        if value == base_values[key]:
            continue
        if key in ("model.preset", "hardware.gpu") and value == CUSTOM:
            continue
        overrides[key] = value
    if overrides.get("model.preset"):
        # A new model preset replaces the dims the old one had: start the model from it.
        raw["model"] = {"preset": overrides.pop("model.preset")}
    return apply_overrides(raw, overrides)


# ------------------------------------------------------------------------------------------------
# Sidebar
# ------------------------------------------------------------------------------------------------
def sidebar(errors: dict[str, Any]) -> dict[str, Any]:
    shipped = shipped_scenarios()
    st.sidebar.selectbox("Scenario", list(shipped), key="_scenario", on_change=on_preset_change,
                         format_func=lambda n: f"{n} — {preset_scenario(n)[1].name}",
                         help="A preset from scenarios/; every change below is relative to it.")
    placeholders = {}
    for name, items in SECTIONS:
        with st.sidebar.expander(name, expanded=name == "Parallelism"):
            placeholders[name] = st.empty()
            for key, label, kind in items:
                field = FIELDS.get(key)
                meta = field.metadata if field is not None else {}
                help_ = meta.get("doc")
                if kind == "dp":
                    p = [st.session_state["parallelism.tp"], st.session_state["parallelism.pp"],
                         st.session_state["parallelism.cp"]]
                    gpus = st.session_state["cluster.nodes"] * st.session_state["cluster.gpus_per_node"]
                    denom = p[0] * p[1] * p[2]
                    text = (f"**dp = {gpus // denom}** (derived: {gpus} GPUs / (tp·pp·cp))" if gpus % denom == 0
                            else f"**dp undefined**: tp·pp·cp = {denom} does not divide {gpus} GPUs")
                    st.markdown(text)
                elif kind == "model":
                    st.selectbox(label, [CUSTOM] + list(model_presets()), key=key,
                                 on_change=on_model_preset_change, help="Loads the preset's dimensions")
                elif kind == "gpu":
                    opts = list(gpu_presets()) + ([CUSTOM] if st.session_state.get(key) == CUSTOM else [])
                    st.selectbox(label, opts, key=key, help="Vendor peak figures (explorer/data/gpus.yaml)")
                elif kind == "choice":
                    st.selectbox(label, list(meta["choices"]), key=key, help=help_)
                elif kind == "order":
                    opts = list(dict.fromkeys([st.session_state[key]] + ORDERS))
                    st.selectbox(label, opts, key=key, help=help_)
                elif kind == "bool":
                    st.toggle(label, key=key, help=help_)
                elif kind == "int":
                    st.number_input(label, min_value=int(meta.get("min", 0)), max_value=int(meta.get("max", 10**9)),
                                    step=1, key=key, help=help_)
                else:
                    # Bandwidths must be > 0: the input stops at 0 and validation names the field.
                    st.number_input(label, min_value=float(meta.get("min", meta.get("gt", 0.0))),
                                    max_value=float(meta.get("max", 1e12)), key=key, help=help_, format="%g")
    return placeholders


# ------------------------------------------------------------------------------------------------
# Views
# ------------------------------------------------------------------------------------------------
def fmt_time(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def metrics(res: dict[str, Any], sc: Scenario) -> None:
    j = res["json"]
    mem = j["memory_GB"]["total"]
    cap = j["memory_capacity_GB"]
    cols = st.columns(6)
    # No help icons on the cards: at six cards per row they would truncate the labels; the
    # conventions are in the Timeline view's "How to read this".
    cols[0].metric("Iteration time", fmt_time(j["iteration_time_s"]), border=True)
    cols[1].metric("Tokens/s", f"{j['tokens_per_s']:,.0f}", border=True)
    cols[2].metric("MFU", f"{j['mfu']:.1%}", border=True)
    cols[3].metric("TFLOP/s per GPU", f"{j['tflops_per_gpu']:.0f}", border=True)
    cols[4].metric("Bubble", f"{j['bubble_fraction']:.1%}", border=True)
    cols[5].metric("Memory per GPU", f"{mem:.1f} GB", border=True,
                   delta=(f"over {cap:g} GB" if mem > cap else f"of {cap:g} GB"),
                   delta_color="inverse" if mem > cap else "off", delta_arrow="off")


def timeline_view(res: dict[str, Any], raw_json: str, present: bool) -> None:
    j = res["json"]
    font = 16 if present else 12
    left, right = st.columns([7, 3], gap="small")
    with left:
        fig, info = gantt_cached(raw_json, present)
        st.plotly_chart(fig, key="gantt", config={"displaylogo": False, "scrollZoom": True})
        sched = j["parallelism"]["schedule"]
        if j.get("dp_priority"):
            st.caption("P3 bucket priorities: the next iteration starts on its first layers while later "
                       "buckets are still reduced; the metrics measure that steady-state period.")
        if sched in ("zb-h2", "pipedream-async"):
            st.caption("Iterations of this schedule overlap: the chart shows "
                       + ("one iteration alone" if sched == "zb-h2" else "two iterations back to back")
                       + "; the metrics and breakdown measure the steady state.")
        if len(res["labels"]) > 6:
            st.caption("One band per pipeline stage: compute in the middle (blocking TP/CP/EP collectives "
                       "in their colours), the `dp` stream above it, `pp` transfers below.")
        if info.merged or res["full_rows"] > res["draw_rows"]:
            how = ("then aggregated to screen resolution: a bar shows the kind that fills most of its "
                   "pixels; in each band compute is drawn above the collectives that block it"
                   if info.merged else "one bar per pass and kind")
            st.caption(f"Large timeline: {res['full_rows']:,} per-layer operations drawn as {info.bars:,} bars "
                       f"({how}). Download the Perfetto trace for every single operation.")
    with right:
        st.plotly_chart(figures.breakdown(j["breakdown_s"], j["iteration_time_s"], title=f"Where the time goes · "
                                          f"{j['breakdown_class'].split(' (')[0]}", height=300, font_size=font),
                        key="breakdown", config={"displayModeBar": False})
        st.info(j["bottleneck"])
        for w in j["warnings"]:
            st.warning(w, icon="⚠️")
    with st.expander("How to read this"):
        st.markdown(
            "- **Lanes** are GPU classes (one per pipeline stage; ×N says how many GPUs behave identically) "
            "times streams: `compute` runs forward (blue), backward (orange), weight gradients (yellow), "
            "recompute (mauve), DualPipe's fused forward+backward (violet) and the optimizer (grey); "
            "`tp`/`cp`/`ep` show collectives that block compute; `pp` the activations sent to the next "
            "stage; `dp` gradient buckets and ZeRO gathers.\n"
            "- **Empty space on a compute lane is idle time**: the pipeline bubble, or waiting for "
            "communication. Zoom with the mouse wheel or a box, double-click to reset; hover a bar for "
            "its bytes, group size, algorithm, limiting tier and achieved bandwidth.\n"
            "- **The breakdown** splits the iteration of the busiest stage into compute, recompute, "
            "exposed communication per dimension, bubble and optimizer; it sums to the iteration time.\n"
            "- **The cards**: *MFU* = model FLOPs without recompute / (time × GPUs × bf16 peak) (PaLM, "
            "App. B); *TFLOP/s per GPU* counts the hardware FLOPs executed, recompute included "
            "(Megatron-LM's convention); *Bubble* is the busiest stage's idle share; *Memory* is weights + "
            "gradients + optimizer state + peak activations on the fullest stage.")


def memory_view(res: dict[str, Any], present: bool) -> None:
    j = res["json"]
    labels = [l.split(" (")[0] for l in res["labels"]]
    st.plotly_chart(figures.memory(res["memory"], labels, j["memory_capacity_GB"], font_size=16 if present else 12),
                    key="memory", config={"displaylogo": False})
    for w in j["warnings"]:
        if w.startswith("memory"):
            st.warning(w, icon="⚠️")
    with st.expander("How to read this"):
        st.markdown(
            "Per-GPU memory of each pipeline stage: bf16 weights and gradients, fp32 optimizer state "
            "(12 bytes per parameter for Adam), each divided across the data-parallel group as the ZeRO "
            "stage says (stage 1: optimizer, 2: + gradients, 3: + weights), and activations at the "
            "peak of the stage's schedule — with 1F1B the first stage holds `pp` micro-batches in flight, "
            "with GPipe all of them (Korthikanti et al. 2022 for the bytes per layer).")


def topology_view(res: dict[str, Any], sc: Scenario, present: bool) -> None:
    util = res["utilisation"]
    j = res["json"]
    links = j["links"]
    exposed = {d: j["breakdown_s"][d] for d in ("tp", "cp", "ep", "pp", "dp") if d in links and j["breakdown_s"][d] > 0}
    if exposed:
        dim = max(exposed, key=exposed.get)
        hot = links[dim]["tier"]
        note = f"limits {dim.upper()} ({exposed[dim] / j['iteration_time_s']:.0%} of the iteration exposed)"
    else:
        hot, note = max(util, key=util.get), "busiest"
    st.plotly_chart(figures.topology(sc.cluster, res["leaf_nodes"], util, font_size=15 if present else 12,
                                     hot=hot, hot_note=note), key="topology", config={"displaylogo": False})
    st.markdown(f"The link that costs the most time: **{figures.TIER_LABELS.get(hot, hot)}** — {note}. "
                "Average utilisation over the iteration: "
                + " · ".join(f"{figures.TIER_LABELS[k]} {v:.0%}" for k, v in util.items()))
    if links:
        st.dataframe([{"dimension": d, "call": l["op"], "bytes": f"{l['bytes'] / 1e6:.1f} MB", "group": l["group"],
                       "algorithm": l["algorithm"], "limited by": l["tier"], "bus bandwidth": f"{l['busbw_GBps']:.1f} GB/s"}
                      for d, l in links.items()], hide_index=True)
    with st.expander("How to read this"):
        st.markdown(
            "The cluster collapsed: datacenters, the spine, leaf blocks (nodes under one leaf switch) "
            "and nodes (8 GPUs on NVLink each). Links are coloured by how busy their tier is on average "
            "during the iteration (grey idle → red saturated). All groups of a dimension communicate at "
            "once and share the links they cross, so rank placement (`parallelism.order`) decides which "
            "tier each dimension loads; an oversubscribed spine or a WAN shows up here first.")


def scenario_view(res: dict[str, Any], raw_json: str, sc: Scenario) -> None:
    c1, c2 = st.columns([3, 2])
    with c1:
        st.markdown(sc.description or "_No description._")
        st.markdown(f"**Layers per pipeline chunk:** {', '.join(map(str, res['json']['stage_layers']))} · "
                    f"**micro-batches per pipeline:** {res['json']['micro_batches']}")
    with c2:
        st.download_button("Download Perfetto trace (JSON)", data=lambda: full_timeline(raw_json).to_trace_json(),
                           file_name="trace.json", mime="application/json", help="Open in ui.perfetto.dev")
        st.download_button("Download timeline (CSV)", data=lambda: full_timeline(raw_json).to_csv(),
                           file_name="timeline.csv", mime="text/csv")
        st.download_button("Download scenario (YAML)", data=res["yaml"], file_name="scenario.yaml",
                           mime="application/x-yaml")
        up = st.file_uploader("Load a scenario YAML", type=["yaml", "yml", "json"], key="_upload")
        if up is not None and st.session_state.get("_uploaded_id") != up.file_id:
            st.session_state["_uploaded_id"] = up.file_id
            try:
                if up.size > 200_000:
                    raise ScenarioError(up.name, f"is {up.size:,} bytes; the limit is 200,000")
                raw = parse_text(up.getvalue().decode("utf-8", errors="replace"), up.name)
                sc_up = from_dict(raw)
                # The link of an uploaded scenario: the current preset plus every field that differs.
                base = preset_scenario(st.session_state["_scenario"])[1]
                extra = {k: yaml.safe_load(v) for k, v in changed_fields(base, sc_up).items()}
                st.session_state["_extra"] = {k: v for k, v in extra.items() if k not in WIDGET_KEYS}
                set_widgets(sc_up)
                st.rerun()
            except ScenarioError as exc:
                st.error(f"Upload not loaded — {exc}")
        st.code(res["yaml"], language="yaml")
    with st.expander("How to read this"):
        st.markdown(
            "The preset's own description says what it demonstrates. The YAML is the scenario on "
            "screen, every default filled in: download it, edit it, and load it back with the "
            "uploader, or run it with `python -m explorer run scenario.yaml`. The Perfetto trace "
            "(open it in ui.perfetto.dev) has one process per GPU class and one thread per stream, "
            "with every operation; the CSV is the same table.")


def share_link(query: dict[str, str]) -> str:
    base = (st.context.url or "").split("?")[0]
    return f"{base}?{urlencode(query)}"


def inject_css(present: bool) -> None:
    css = """
    <style>
    .block-container {padding-top: 2.2rem; padding-bottom: 0.5rem;}
    [data-testid="stMetric"] {padding: 4px 10px;}
    [data-testid="stMetricValue"] {font-size: 1.35rem;}
    [data-testid="stMetric"] label p {font-size: 0.85rem;}
    </style>"""
    if present:
        css += """
    <style>
    html, body, [class*="st-"] {font-size: 20px;}
    [data-testid="stMetricValue"] {font-size: 2.2rem;}
    [data-testid="stMetricLabel"] p {font-size: 1.15rem;}
    h2 {font-size: 2.1rem;}
    </style>"""
    st.markdown(css, unsafe_allow_html=True)


def main() -> None:
    present_link = str(st.query_params.get("present", "")).lower() in ("1", "true", "yes", "on")
    st.set_page_config(page_title="CommExplorer", page_icon="📡", layout="wide",
                       initial_sidebar_state="collapsed" if present_link else "expanded")
    if "_init" not in st.session_state:
        init_state()
    view: SharedView = st.session_state["_view"]
    present = view.present
    inject_css(present)

    errors: dict[str, Any] = {}
    placeholders = sidebar(errors)
    try:
        raw = current_raw()
        sc = from_dict(raw)
        error = None
    except ScenarioError as exc:
        error, sc, raw = exc, None, None
    if error is not None:
        placeholders[section_of(error.field)].error(str(error), icon="⚠️")
        last = st.session_state.get("_last_good")
        if last is None:
            st.error(f"Invalid scenario — {error}")
            st.stop()
        raw, sc = last
    else:
        st.session_state["_last_good"] = (raw, sc)

    raw_json = json.dumps(raw, sort_keys=True, default=str)
    res = simulate_cached(raw_json)
    # Link warnings describe the link as opened; once the user changes something they are stale.
    if st.session_state.get("_link_json") is None:
        st.session_state["_link_json"] = raw_json
    elif st.session_state["_link_json"] != raw_json:
        st.session_state["_warnings"] = []

    # Address bar = share link.
    name = st.session_state["_scenario"]
    base_sc = preset_scenario(name)[1]
    view.scenario = name
    tab_label = st.session_state.get("view_tab")
    if tab_label:
        view.view = next(k for k, v in VIEW_LABELS.items() if v == tab_label)
    query = to_query(view, base_sc, sc)
    if dict(st.query_params) != query:
        st.query_params.from_dict(query)

    head, link = st.columns([5, 1], vertical_alignment="center")
    head.markdown(f"{'##' if present else '###'} {sc.name}")
    with link.popover("Copy link", icon=":material/link:", use_container_width=True):
        st.caption("This link reopens exactly this view:")
        st.code(share_link(query), language=None, wrap_lines=True)
    for w in st.session_state.get("_warnings", []):
        st.warning(f"Link: {w}", icon="⚠️")
    if error is not None:
        st.error(f"{error} — showing the last valid scenario.", icon="⚠️")

    if not present:
        metrics(res, sc)
    tabs = st.tabs(list(VIEW_LABELS.values()), key="view_tab", default=VIEW_LABELS[view.view], on_change="rerun")
    views = list(VIEW_LABELS)
    for tab, key in zip(tabs, views):
        if tab.open is False:
            continue
        with tab:
            if key == "timeline":
                timeline_view(res, raw_json, present)
            elif key == "memory":
                memory_view(res, present)
            elif key == "topology":
                topology_view(res, sc, present)
            else:
                scenario_view(res, raw_json, sc)
    if present:
        metrics(res, sc)


main()
