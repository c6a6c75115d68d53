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
from ...network.compression_quality import convergence_cost
from ...result.windows import SyncWindow
from ...variants.lowcomm.loss_law import DilocoLoss
from ...variants.lowcomm.report import exchange_sentences, sync_sentences
from ..cache import ViewData, consensus_curve
from ..export import chart
from ..widget_defaults import kept_expander

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


def _trade(w: SyncWindow) -> None:
    """What the window buys per step (simulated) beside what it costs in loss (DiLoCo's published
    law: an estimate), as two cards, the law's sentence with its caveats below them."""
    if w.speedup is None and w.loss is None:
        return
    left, right = st.columns(2)
    if w.speedup is not None and w.every_step_s is not None:
        left.metric("Per step, against every-step sync", f"{w.speedup:.3g}x faster",
                    help=f"simulated: {w.time_per_step_s:.4g} s per step against {w.every_step_s:.4g} s "
                         "for the same scenario synchronising every step over the same links")
    if w.loss is not None:
        law = DilocoLoss.from_json(w.loss)
        right.metric("Tokens to data-parallel's loss", f"{law.compute_ratio:.3g}x",
                     # The sign leads so the arrow follows it; a lower loss is the good direction.
                     delta=f"{law.relative_loss:+.2%} loss", delta_color="inverse",
                     help="an estimate from DiLoCo's published scaling laws (Charles et al. 2025), "
                          "not simulated")
        st.caption(f"Loss (estimate from the literature, not simulated): {law.sentence()}")


def render(data: ViewData, raw_json: str, present: bool) -> None:
    """Draw the window of ``data``'s run, if it has one, or its gossip / parameter-server exchange."""
    cc = convergence_cost(data.scenario.communication.compression)
    if cc is not None:
        st.caption(f"Convergence (cited, not simulated): {cc.sentence()}")
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
    unfold = kept_expander("Every inner step, unfolded", "sync_unfold")
    if unfold.open:
        with unfold:
            chart(sync_window_figure(w, height=height, font_size=font, fold=False), key="sync_window_all",
                  present=present)
    if w.kind in ("local-sgd", "diloco") and not present:
        how = kept_expander("How many replicas, how often to synchronise", "consensus")
        if how.open:
            with how:
                chart(consensus_figure(consensus_curve(raw_json)), key="consensus_chart", present=present,
                                config={"displaylogo": False})
    lines = sync_sentences(w)
    _trade(w)
    st.caption(" · ".join(line for line in lines[:-1] if not line.startswith(("per step: ", "loss: "))))
    note = lines[-1].removeprefix("quality: ").removesuffix(" — not simulated here")
    st.caption(f"Quality (cited from the paper, not simulated): {note}")
    compare_link("Compare with every-step synchronisation", BASELINE,
                 "Opens the Compare view with B = this scenario synchronised every step")
