"""The Topology tab: the cluster, how busy each tier is, and what each dimension sends where."""
from __future__ import annotations

import streamlit as st

from ... import figures
from ...figures.datacenters import format_bytes
from ...figures.fonts import PRESENT_FONT_PX
from ...vocabulary import tier_label
from ..cache import ViewData
from ..export import chart


def hot_tier(data: ViewData) -> tuple[str | None, str]:
    """The tier limiting the dimension with the most exposed time, and a note saying so."""
    j = data.summary
    return figures.hot_tier({d: c.tier for d, c in j.links.items()}, j.breakdown_s, j.iteration_time_s,
                            data.utilisation)


def render_datacenters(data: ViewData, present: bool) -> None:
    """The datacenter map (two or more datacenters): boxes by GPUs, WAN links by bytes and utilisation."""
    j = data.summary
    fig = figures.datacenter_map(data.scenario, [w._asdict() for w in j.wan_links], j.comm_bytes_by_tier,
                                 height=(250 if present else 290) if data.scenario.cluster.datacenters == 2
                                 else (360 if present else 420), font_size=PRESENT_FONT_PX if present else 12)
    if fig is None:
        if data.scenario.cluster.datacenters > figures.MAX_MAP_DATACENTERS:
            st.caption(f"{data.scenario.cluster.datacenters:,} datacenters: the datacenter map draws up to "
                       f"{figures.MAX_MAP_DATACENTERS}; `wan_links` in the JSON lists the loaded links.")
        return
    chart(fig, key="datacenters", present=present, config={"displaylogo": False})
    busiest = max(j.wan_links, key=lambda w: w.utilisation, default=None)
    if busiest and busiest.utilisation > 0 and not present:
        tied = sum(w.utilisation >= busiest.utilisation * (1 - 1e-3) for w in j.wan_links)
        more = f" (and {tied - 1} more, equally loaded)" if tied > 1 else ""
        which = f"**{busiest.a} ↔ {busiest.b}**{more}"
        st.caption(f"Limiting WAN link: {which}, "
                   f"{format_bytes(busiest.bytes_per_iteration)} per iteration in its busier direction, "
                   f"{busiest.utilisation:.0%} of its achievable capacity over the iteration. "
                   "Hover a link for both directions.")


def render(data: ViewData, present: bool) -> None:
    j = data.summary
    util = data.utilisation
    hot, note = hot_tier(data)
    render_datacenters(data, present)
    chart(figures.topology(data.scenario, util, hot=hot, hot_note=note, height=400 if present else 460,
                           font_size=PRESENT_FONT_PX if present else 12),
                    key="topology", present=present, config={"displaylogo": False})
    kind = data.scenario.cluster.scale_up.kind
    label = tier_label(hot, kind) if hot else "none"
    st.markdown(f"The link that costs the most time: **{label}** — {note}. Average utilisation over the "
                "iteration: " + " · ".join(f"{tier_label(k, kind)} {v:.0%}" for k, v in util.items()
                                           if k in figures.TIER_LABELS))
    rows = []
    by_dim = j.comm_bytes_per_gpu
    for d, link in j.links.items():
        rows.append({"dimension": d, "sent per GPU per iteration": format_bytes(by_dim.get(d, 0.0)),
                     "typical call": link.op, "call size": f"{link.bytes / 1e6:,.1f} MB",
                     "group": link.group, "algorithm": link.algorithm, "limited by": link.tier,
                     "bus bandwidth": f"{link.busbw_GBps:.1f} GB/s"})
    if rows:
        st.dataframe(rows, hide_index=True)
    if not present:
        with st.expander("How to read this"):
            st.markdown(
                "The cluster: datacenters, the spine, leaf blocks (nodes under one leaf switch) and nodes; "
                "small clusters are drawn GPU by GPU with their parallel groups. Links are coloured by how "
                "busy their tier is on average during the iteration, on an absolute scale (grey idle → red "
                "saturated). All groups of a dimension communicate at once and share the links they cross, "
                "so rank placement (`parallelism.order`) decides which tier each dimension loads; an "
                "oversubscribed spine or a WAN shows up here first. The table gives every dimension's bytes "
                "per GPU and one typical call; the Traffic tab splits the bytes by tier. With two or more "
                "datacenters, the map above draws each datacenter as a box sized by its GPUs (labelled with "
                "the dimensions whose traffic crosses the WAN) and each link of the WAN topology (mesh, ring "
                "or hub) with the bytes of its busier direction per iteration and how busy that direction "
                "is, on the same absolute scale; the most utilised link is outlined and labelled limiting.")
