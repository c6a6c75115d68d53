"""Low-communication training under the Gantt: for training.sync, one window of inner steps and its
synchronisation; for parallelism.dp_kind, the gossip or parameter-server exchange; the sentences
that explain them, and a one-click comparison with the synchronous baseline (the Compare view with
B = every-step or allreduce, which the share link carries)."""
from __future__ import annotations

import streamlit as st

from ...figures.sync_window import consensus_figure, sync_window_figure
from ...lowcomm import SyncWindow
from ...lowcomm.decentral import Exchange
from ...lowcomm.report import exchange_sentences, sync_sentences
from ..cache import ViewData, consensus_curve
from ..export import chart

BASELINE = {"training.sync.kind": "every-step"}


def _compare_with_baseline() -> None:
    """Open the Compare view with B = this scenario synchronised every step (a widget callback:
    it runs before the next script run, when the tab's state may still be written)."""
    st.session_state["_b_overrides"] = dict(BASELINE)
    st.session_state["_b_msg"] = None
    st.session_state["view_tab"] = "Compare"


def _compare_with_allreduce() -> None:
    """Open the Compare view with B = this scenario's replicas all-reducing their gradients."""
    st.session_state["_b_overrides"] = {"parallelism.dp_kind": "allreduce"}
    st.session_state["_b_msg"] = None
    st.session_state["view_tab"] = "Compare"


def _compare_uncompressed() -> None:
    """Open the Compare view with B = this scenario without gradient compression."""
    st.session_state["_b_overrides"] = {"communication.compression.kind": "none"}
    st.session_state["_b_msg"] = None
    st.session_state["view_tab"] = "Compare"


def render(data: ViewData, raw_json: str, present: bool) -> None:
    """Draw the window of ``data``'s run, if it has one, or its gossip / parameter-server exchange."""
    if data.scenario.communication.compression.active:
        st.button("Compare without compression", key="compression_baseline", on_click=_compare_uncompressed,
                  icon=":material/compare_arrows:",
                  help="Opens the Compare view with B = this scenario without compression")
    x = data.json.get("dp_exchange")
    if x:
        lines = exchange_sentences(Exchange(**x))
        st.caption(" · ".join(lines[:-1]))
        st.caption(f"Quality (cited from the paper, not simulated): "
                   f"{lines[-1].removeprefix('quality: ').removesuffix(' — not simulated here')}")
        st.button("Compare with the gradient all-reduce", key="dp_baseline", on_click=_compare_with_allreduce,
                  icon=":material/compare_arrows:",
                  help="Opens the Compare view with B = this scenario with parallelism.dp_kind: allreduce")
    sync = data.json.get("sync")
    if not sync:
        return
    w = SyncWindow.from_json(sync)
    fold = st.toggle("Fold repeated inner steps", value=True, key="sync_fold",
                     help="Runs of identical inner steps drawn as one block marked xK; off: every step")
    chart(sync_window_figure(w, height=210 if present else 240, font_size=15 if present else 12,
                                       fold=fold),
                    key="sync_window", present=present, config={"displaylogo": False})
    if w.kind in ("local-sgd", "diloco") and not present:
        how = st.expander("How many replicas, how often to synchronise", key="consensus", on_change="rerun")
        if how.open:
            with how:
                chart(consensus_figure(consensus_curve(raw_json)), key="consensus_chart", present=present,
                                config={"displaylogo": False})
    lines = sync_sentences(w)
    st.caption(" · ".join(lines[:-1]))
    note = lines[-1].removeprefix("quality: ").removesuffix(" — not simulated here")
    st.caption(f"Quality (cited from the paper, not simulated): {note}")
    st.button("Compare with every-step synchronisation", key="sync_baseline", on_click=_compare_with_baseline,
              icon=":material/compare_arrows:",
              help="Opens the Compare view with B = this scenario synchronised every step")
