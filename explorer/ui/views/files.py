"""The Scenario & files tab: the description, downloads (trace, CSV, YAML, HTML report) and the upload."""
from __future__ import annotations

import streamlit as st

from ..cache import ViewData, full_timeline
from ..report import report_of_view
from ..state import on_upload
from . import trace_overlay

# Downloads expand every layer of every micro-batch, and Streamlit keeps a download in the server's
# memory for the session; beyond this many rows (a ~40 MB CSV, a ~70 MB trace) they are refused with
# the knobs that make them smaller, and the CLI (which streams to a file) is the way.
MAX_DOWNLOAD_ROWS = 300_000


def render(data: ViewData, raw_json: str, present: bool = False) -> None:
    sc = data.scenario
    c1, c2 = st.columns([3, 2])
    with c1:
        note = st.session_state.get("_modified_note")
        if note:
            st.info(f"{note}. The description below is the preset's as shipped; its figures may no "
                    "longer hold.", icon="✏️")
        st.markdown(sc.description or "_No description._")
        st.markdown(f"**Layers per pipeline chunk:** {', '.join(map(str, data.summary.stage_layers))} · "
                    f"**micro-batches per pipeline:** {data.summary.micro_batches}")
    with c2:
        if data.full_rows <= MAX_DOWNLOAD_ROWS:
            st.download_button("Download Perfetto trace (JSON)",
                               data=lambda: full_timeline(raw_json, MAX_DOWNLOAD_ROWS).to_trace_json(),
                               file_name="trace.json", mime="application/json",
                               help="Open in ui.perfetto.dev")
            st.download_button("Download timeline (CSV)",
                               data=lambda: full_timeline(raw_json, MAX_DOWNLOAD_ROWS).to_csv(),
                               file_name="timeline.csv", mime="text/csv")
        else:
            st.caption(f"Trace and CSV downloads: the timeline has {data.full_rows:,} per-layer "
                       f"operations, more than the {MAX_DOWNLOAD_ROWS:,} a download holds; fewer layers, "
                       "micro-batches (training.global_batch) or stages make it smaller — or use "
                       "`python -m explorer run ... --trace`.")
        st.download_button("Download scenario (YAML)", data=data.yaml, file_name="scenario.yaml",
                           mime="application/x-yaml")
        # Bounded whatever the scenario (the Gantt is drawn at most MAX_BARS bars): always offered;
        # made on click only (explorer/ui/report.py: from the cached view, no second simulation).
        link = st.session_state.get("_share_link", "")
        st.download_button("Download report (HTML)", data=lambda: report_of_view(data, link),
                           file_name="commexplorer-report.html", mime="text/html",
                           help="One file with the cards, every chart, the YAML and the share link; "
                                "opens offline in any browser")
        st.file_uploader("Load a scenario YAML", type=["yaml", "yml", "json"], key="_upload",
                         on_change=on_upload)
        msg = st.session_state.get("_upload_msg")
        if msg:
            (st.error if msg[0] == "error" else st.success)(msg[1])
        st.code(data.yaml, language="yaml")
    trace_overlay.render(data, raw_json, present)
    with st.expander("How to read this"):
        st.markdown(
            "The preset's own description says what it demonstrates. The YAML is the scenario on screen, "
            "every default filled in: download it, edit it, and load it back with the uploader, or run it "
            "with `python -m explorer run scenario.yaml`. The Perfetto trace (open it in ui.perfetto.dev) "
            "has one process per GPU class and one thread per stream, with every operation; the CSV is the "
            "same table.")
