"""Low-communication training under the Gantt: for training.sync, one window of inner steps and its
synchronisation; for parallelism.dp_kind, the gossip or parameter-server exchange; the sentences
that explain them (with stragglers, what asynchronous gossip buys), and a one-click comparison with
the synchronous baseline (the Compare view with B = every-step, allreduce or, for gossip-async,
synchronous one-peer gossip, which the share link carries)."""
from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from ...figures.fonts import PRESENT_FONT_PX
from ...figures.sync_window import consensus_figure, sync_window_figure
from ...variants.lowcomm.report import exchange_sentences, sync_sentences
from ..cache import ViewData, consensus_curve
from ..export import chart

BASELINE = {"training.sync.kind": "every-step"}
# gossip-async's synchronous counterpart: one model per step to one neighbour, with the barrier.
SYNC_GOSSIP = {"parallelism.dp_kind": "gossip-exponential", "parallelism.gossip_peers": "1"}


def compare_link(label: str, b_overrides: dict[str, str], why: str) -> None:
    """A link to the Compare view with B = this scenario plus ``b_overrides``: the page's own share
    link with ``b.`` parameters and ``view=compare`` (a link, not a callback: what opens is exactly
    what the link says, in a new tab, and the share machinery reproduces it)."""
    query = {k: v for k, v in st.query_params.items() if not k.startswith("b.") and k != "view"}
    query.update({f"b.{k}": v for k, v in b_overrides.items()}, view="compare")
    st.link_button(label, "?" + urlencode(query), icon=":material/compare_arrows:", help=why)


def render(data: ViewData, raw_json: str, present: bool) -> None:
    """Draw the window of ``data``'s run, if it has one, or its gossip / parameter-server exchange."""
    if data.scenario.communication.compression.active:
        compare_link("Compare without compression", {"communication.compression.kind": "none"},
                     "Opens the Compare view with B = this scenario without compression")
    ex = data.summary.exchange
    if ex is not None:
        lines = exchange_sentences(ex)
        # The stragglers' sentence (what gossip-async buys when replicas differ in speed) on its own.
        speeds = [line for line in lines[:-1] if line.startswith("stragglers: ")]
        st.caption(" · ".join(line for line in lines[:-1] if line not in speeds))
        for line in speeds:
            st.caption("Replicas at different speeds (cluster.stragglers): "
                       + line.removeprefix("stragglers: "))
        st.caption(f"Quality (cited from the paper, not simulated): "
                   f"{lines[-1].removeprefix('quality: ').removesuffix(' — not simulated here')}")
        compare_link("Compare with the gradient all-reduce", {"parallelism.dp_kind": "allreduce"},
                     "Opens the Compare view with B = this scenario with parallelism.dp_kind: allreduce")
        if ex.asynchronous:
            compare_link("Compare with synchronous gossip", SYNC_GOSSIP,
                         "Opens the Compare view with B = this scenario with synchronous one-peer gossip "
                         "(D-PSGD on the exponential graph, parallelism.gossip_peers: 1)")
    w = data.summary.sync
    if w is None:
        return
    font, height = (PRESENT_FONT_PX, 210) if present else (12, 240)
    chart(sync_window_figure(w, height=height, font_size=font), key="sync_window", present=present)
    unfold = st.expander("Every inner step, unfolded", key="sync_unfold", on_change="rerun")
    if unfold.open:
        with unfold:
            chart(sync_window_figure(w, height=height, font_size=font, fold=False), key="sync_window_all",
                  present=present)
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
    compare_link("Compare with every-step synchronisation", BASELINE,
                 "Opens the Compare view with B = this scenario synchronised every step")
