"""The datacenter map: datacenters as boxes sized by their GPUs, the WAN links of the topology
between them, each coloured and widened by how busy it is (issue 12.6).

The numbers come from the run's ``wan_links`` (explorer/analysis/report.py: per link, the bytes of
its busier direction per iteration and that direction's utilisation = bytes / (achievable
capacity x iteration time)); the colour is the topology figure's absolute scale (grey idle -> red
saturated, :func:`explorer.figures.topology.utilisation_color`).  The limiting link - the most
utilised one - is drawn over a dark halo and named in its label.  The links drawn are exactly the
topology's (explorer/config/wan.py ``topology_pairs``): a hub draws only its spokes.  One
datacenter draws no map (:func:`datacenter_map` returns None).  No Streamlit here.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from .. import dimensions
from ..config.wan import topology_pairs
from ..scenario import Scenario
from ..variants.hetero import dc_gpu
from .topology import UTIL_STOPS, utilisation_color

HALO = "#222"
BOX_FILL, BOX_LINE = "#EEF3FA", "#4C78A8"
# Box fills by GPU type, in the order the datacenters name them: the first (usually the only) type
# keeps BOX_FILL; datacenters of another generation are told apart at a glance.
GPU_FILLS = (BOX_FILL, "#FCEBD6", "#E3F2E1", "#F3E3F3")
LABEL_SPOTS = (0.5, 0.35, 0.65, 0.25, 0.75)   # where along a link its label may sit, in order


@dataclass(frozen=True)
class WanLinkView:
    """One drawn WAN link: its ends (datacenter indices), numbers from ``wan_links`` and whether it
    is the limiting (most utilised) link."""

    a: int
    b: int
    bytes_per_iteration: float
    utilisation: float
    bytes_a_to_b: float
    bytes_b_to_a: float
    bandwidth_Gbps: float
    latency_ms: float
    limiting: bool


def crossing_dims(comm_bytes_by_tier: Mapping[str, Mapping[str, float]]) -> tuple[str, ...]:
    """The parallel dimensions that send bytes over the WAN (scale-across tier), in registry order
    (explorer/dimensions.py, those the datacenter map shows).

    >>> crossing_dims({"dp": {"scale-across": 8.0}, "pp": {"scale-across": 0.0}, "tp": {}})
    ('dp',)
    """
    return tuple(d for d in dimensions.shown_in("datacenters")
                 if comm_bytes_by_tier.get(d, {}).get("scale-across", 0.0) > 0)


def link_views(sc: Scenario, wan_links: Sequence[Mapping]) -> tuple[WanLinkView, ...]:
    """The topology's links with their ``wan_links`` numbers (a link the report lacks is idle at the
    scenario's nominal figures); the most utilised busy link, and any loaded as much, is limiting."""
    c = sc.cluster
    names = [c.datacenter_name(d) for d in range(c.datacenters)]
    by_pair = {frozenset((w["a"], w["b"])): w for w in wan_links}
    wan = c.scale_across
    views = []
    for a, b in topology_pairs(wan.topology, c.datacenters):
        w = by_pair.get(frozenset((names[a], names[b])), {})
        forward = w.get("a", names[a]) == names[a]
        ab, ba = w.get("bytes_a_to_b", 0.0), w.get("bytes_b_to_a", 0.0)
        views.append(dict(a=a, b=b, bytes_per_iteration=w.get("bytes_per_iteration", 0.0),
                          utilisation=w.get("utilisation", 0.0), bytes_a_to_b=ab if forward else ba,
                          bytes_b_to_a=ba if forward else ab,
                          bandwidth_Gbps=w.get("bandwidth_Gbps", wan.bandwidth_Gbps),
                          latency_ms=w.get("latency_ms", wan.latency_ms)))
    top = max((v["utilisation"] for v in views), default=0.0)
    # Equally loaded links (a ring collective loads every link it crosses alike) are all limiting.
    return tuple(WanLinkView(**v, limiting=top > 0 and v["utilisation"] >= top * (1 - 1e-3)) for v in views)


def _centres(topology: str, dcs: int) -> list[tuple[float, float]]:
    """Box centres: two side by side; a hub in the middle of its spokes; else a circle whose ring
    links are its sides (datacenter i next to i+1, clockwise from the top left)."""
    if dcs == 2:
        return [(-1.6, 0.0), (1.6, 0.0)]
    if topology == "hub":
        n = dcs - 1
        start = math.pi if n == 2 else math.pi / 2 + math.pi / n
        return [(0.0, 0.0)] + [(2.2 * math.cos(start - 2 * math.pi * k / n),
                                1.25 * math.sin(start - 2 * math.pi * k / n)) for k in range(n)]
    start = math.pi / 2 + math.pi / dcs                   # an ellipse: the figure is wider than tall
    return [(2.0 * math.cos(start - 2 * math.pi * k / dcs), math.sin(start - 2 * math.pi * k / dcs))
            for k in range(dcs)]


def format_bytes(n: float) -> str:
    """Bytes as TB, GB or MB with a few digits (link labels)."""
    return f"{n / 1e12:,.2f} TB" if n >= 1e12 else f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _label_spot(p: tuple[float, float], q: tuple[float, float], taken: list[tuple[float, float]],
                gap: float) -> tuple[float, float]:
    """The first of LABEL_SPOTS along p->q at least ``gap`` away from every label already placed."""
    spots = [(p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t) for t in LABEL_SPOTS]
    spot = next((s for s in spots if all(math.dist(s, o) >= gap for o in taken)), spots[0])
    taken.append(spot)
    return spot


# Boxes stay readable up to 16 datacenters (the range of multi-datacenter training studies); a
# cluster split into more is drawn by the topology figure alone.
MAX_MAP_DATACENTERS = 16


def datacenter_map(sc: Scenario, wan_links: Sequence[Mapping], comm_bytes_by_tier: Mapping, *,
                   height: int = 460, font_size: int = 12) -> go.Figure | None:
    """Datacenters of ``sc`` as boxes (area by GPUs; name, GPUs and what crosses the WAN) joined by
    the WAN topology's links labelled with bytes per iteration and utilisation; None for one
    datacenter or more than :data:`MAX_MAP_DATACENTERS`.  ``wan_links`` and ``comm_bytes_by_tier``
    are the run's JSON figures."""
    c = sc.cluster
    dcs = c.datacenters
    if dcs < 2 or dcs > MAX_MAP_DATACENTERS:
        return None
    wan = c.scale_across
    links = link_views(sc, wan_links)
    centres = _centres(wan.topology, dcs)
    gpus = [c.nodes_of(d) * c.gpus_per_node for d in range(dcs)]      # sizes may differ (hetero.py)
    kinds = [dc_gpu(sc, d).name for d in range(dcs)]
    fills = {k: GPU_FILLS[i % len(GPU_FILLS)] for i, k in enumerate(dict.fromkeys(kinds))}
    gap = min(math.dist(p, q) for i, p in enumerate(centres) for q in centres[i + 1:])
    hw_max = min(0.42 * gap, 0.6)
    crossing = crossing_dims(comm_bytes_by_tier)
    crosses = ", ".join(d.upper() for d in crossing) or "nothing"
    fig = go.Figure()
    taken: list[tuple[float, float]] = []
    for link in sorted(links, key=lambda k: k.limiting):          # the limiting link drawn last
        p, q = centres[link.a], centres[link.b]
        na, nb = c.datacenter_name(link.a), c.datacenter_name(link.b)
        u = link.utilisation
        width = 3 + 9 * min(u, 1.0)
        steps = 24                                    # points along the line: hover anywhere on it
        xs = [p[0] + (q[0] - p[0]) * k / steps for k in range(steps + 1)]
        ys = [p[1] + (q[1] - p[1]) * k / steps for k in range(steps + 1)]
        hover = (f"<b>WAN link {na} ↔ {nb}</b>{' — limiting (most utilised)' if link.limiting else ''}<br>"
                 f"{na} → {nb}: {format_bytes(link.bytes_a_to_b)} per iteration<br>"
                 f"{nb} → {na}: {format_bytes(link.bytes_b_to_a)} per iteration<br>"
                 f"busier direction {u:.1%} of its achievable capacity over the iteration<br>"
                 f"{link.bandwidth_Gbps:,g} Gb/s per direction · {link.latency_ms:g} ms one way")
        if link.limiting:
            fig.add_trace(go.Scatter(x=[p[0], q[0]], y=[p[1], q[1]], mode="lines", hoverinfo="skip",
                                     showlegend=False, line=dict(color=HALO, width=width + 6),
                                     meta={"role": "halo", "a": na, "b": nb}))
        text = f"{format_bytes(link.bytes_per_iteration)} / iter · {u:.0%} busy"
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", line=dict(color=utilisation_color(u), width=width),
            hoverinfo="text", hovertext=[hover] * len(xs), showlegend=False, name=f"{na} ↔ {nb}: {text}",
            meta={"role": "wan-link", "a": na, "b": nb, "bytes": link.bytes_per_iteration, "utilisation": u,
                  "limiting": link.limiting, "text": text}))
        x, y = _label_spot(p, q, taken, 0.45)
        fig.add_annotation(x=x, y=y, showarrow=False, bgcolor="rgba(255,255,255,0.92)",
                           bordercolor=HALO if link.limiting else "#999",
                           borderwidth=2 if link.limiting else 1,
                           text=("<b>limiting</b> · " if link.limiting else "") + text,
                           font=dict(size=font_size - 1, color="#111"), name="wan-label")
    boxes = []
    for d, (x, y) in enumerate(centres):
        s = math.sqrt(gpus[d] / max(gpus))
        hw, hh = hw_max * s, hw_max * 0.62 * s
        boxes.append((x - hw, y - hh, x + hw, y + hh))
        name = c.datacenter_name(d)
        role = " (hub)" if wan.topology == "hub" and d == 0 and dcs > 2 else ""
        gpu = kinds[d]
        label = f"<b>{name}</b>{role}<br>{gpus[d]:,} GPUs<br>{gpu}<br>across: {crosses}"
        hover = (f"<b>{name}</b>{role}: {gpus[d]:,} GPUs ({c.nodes_of(d):,} nodes of {c.gpus_per_node}) · "
                 f"{gpu}<br>crossing the WAN: {crosses}")
        fig.add_trace(go.Scatter(
            x=[x - hw, x + hw, x + hw, x - hw, x - hw], y=[y - hh, y - hh, y + hh, y + hh, y - hh],
            fill="toself", fillcolor=fills[gpu], mode="lines", line=dict(color=BOX_LINE, width=2),
            hoveron="fills", hoverinfo="text", text=hover, showlegend=False, name=name,
            meta={"role": "datacenter", "name": name, "gpus": gpus[d], "gpu": gpu}))
        fig.add_annotation(x=x, y=y, text=label, showarrow=False, font=dict(size=font_size, color="#111"))
    _colour_bar(fig, font_size)
    xs = [v for b in boxes for v in (b[0], b[2])]
    ys = [v for b in boxes for v in (b[1], b[3])]
    preset = f" · {wan.preset}" if wan.preset != "custom" else ""
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=34, b=10), font=dict(size=font_size), paper_bgcolor="white",
        plot_bgcolor="white", hoverlabel=dict(font_size=font_size), showlegend=False,
        title=dict(text=f"{dcs} datacenters · WAN {wan.topology}{preset} · across the WAN: {crosses}",
                   x=0, xanchor="left", font=dict(size=font_size + 1)),
        xaxis=dict(visible=False, range=[min(xs) - 0.15, max(xs) + 0.15], fixedrange=True),
        yaxis=dict(visible=False, range=[min(ys) - 0.15, max(ys) + 0.15], fixedrange=True,
                   scaleanchor="x", scaleratio=1))
    return fig


def _colour_bar(fig: go.Figure, font_size: int) -> None:
    """The topology figure's absolute utilisation scale as a colour bar."""
    fig.add_trace(go.Scatter(
        x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip", meta={"role": "colorscale"},
        marker=dict(color=[0.0], cmin=0, cmax=1, showscale=True,
                    colorscale=[[u, "rgb({},{},{})".format(*rgb)] for u, rgb in UTIL_STOPS],
                    colorbar=dict(title=dict(text="WAN link busy<br>(busier direction)",
                                             font=dict(size=font_size)),
                                  tickvals=[0, 0.25, 0.5, 0.75, 1.0],
                                  ticktext=["0 % idle", "25 %", "50 %", "75 %", "100 % saturated"],
                                  tickfont=dict(size=font_size - 1), len=0.8, thickness=14))))
