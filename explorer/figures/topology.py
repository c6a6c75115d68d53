"""The cluster drawn as a network: datacenters, spine, leaf blocks, nodes, coloured by tier utilisation.

No Streamlit here: the app only places the figure.
"""
from __future__ import annotations

import plotly.graph_objects as go

from .charts import TIER_LABELS


def _util_color(u: float) -> str:
    """Utilisation 0..1 on a light-grey -> amber -> red ramp (readable on white and projected)."""
    u = max(0.0, min(1.0, u))
    stops = [(0.0, (200, 200, 200)), (0.3, (240, 180, 40)), (0.7, (230, 90, 30)), (1.0, (180, 0, 0))]
    for (u0, c0), (u1, c1) in zip(stops, stops[1:]):
        if u <= u1:
            f = (u - u0) / (u1 - u0)
            return "rgb(%d,%d,%d)" % tuple(round(a + (b - a) * f) for a, b in zip(c0, c1))
    return "rgb(180,0,0)"


def topology(cluster, leaf_nodes: int, utilisation: dict[str, float], height: int = 460,
             font_size: int = 12, max_blocks: int = 3, max_nodes: int = 3,
             hot: str | None = None, hot_note: str = "") -> go.Figure:
    """The cluster collapsed: datacenters -> spine -> leaf blocks -> nodes (boxes of GPUs).

    Big clusters keep the first ``max_blocks`` leaf blocks per datacenter and the first
    ``max_nodes`` nodes per block, with "+N more" labels.  Every link of a tier has that tier's
    colour: its average utilisation relative to the busiest tier (the legend gives the absolute
    figure), and the ``hot`` tier — the one limiting the largest exposed communication — is drawn
    thicker and named in the legend.
    """
    peak = max(list(utilisation.values()) + [1e-9])
    c = cluster
    per_dc = c.nodes // c.datacenters
    blocks = max(1, -(-per_dc // leaf_nodes))
    fig = go.Figure()
    xs_nodes, ys_nodes, node_text, node_hover = [], [], [], []
    dc_width = (min(blocks, max_blocks) + (1 if blocks > max_blocks else 0)) * (max_nodes + 1.5)
    edges: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in TIER_LABELS}
    labels = []
    for dc in range(min(c.datacenters, 4)):
        x0 = dc * (dc_width + 2)
        spine = (x0 + dc_width / 2, 3.0)
        labels.append((spine[0] + 1.2, spine[1], f"spine · DC {dc}" if c.datacenters > 1 else "spine"))
        if c.datacenters > 1:
            gw = (spine[0], 4.2)
            edges["scale-across"].append((*spine, *gw))
            labels.append((gw[0], gw[1] + 0.28, f"DC {dc} gateway"))
        for b in range(min(blocks, max_blocks)):
            bx = x0 + b * (max_nodes + 1.5) + max_nodes / 2
            leaf = (bx, 1.8)
            edges["spine"].append((*leaf, *spine))
            nodes_here = min(leaf_nodes, per_dc - b * leaf_nodes)
            labels.append((leaf[0], leaf[1] + 0.22, f"leaf block {b} ({nodes_here} nodes)"))
            for k in range(min(nodes_here, max_nodes)):
                nx_ = bx - (min(nodes_here, max_nodes) - 1) / 2 + k
                edges["scale-out"].append((nx_, 0.5, *leaf))
                xs_nodes.append(nx_)
                ys_nodes.append(0.3)
                node = dc * per_dc + b * leaf_nodes + k
                node_text.append(f"node {node}")
                node_hover.append(f"node {node}: {c.gpus_per_node} GPUs on {c.scale_up.kind} "
                                  f"({c.scale_up.bandwidth_GBps:g} GB/s per GPU), "
                                  f"{c.scale_out.nics_per_node} x {c.scale_out.nic_Gbps:g} Gb/s NICs")
            if nodes_here > max_nodes:
                labels.append((bx + max_nodes / 2 + 0.1, 0.3, f"+{nodes_here - max_nodes}"))
        if blocks > max_blocks:
            labels.append((x0 + max_blocks * (max_nodes + 1.5) + 0.5, 1.8, f"+{blocks - max_blocks} blocks"))
    if c.datacenters > 1:
        gws = [(dc * (dc_width + 2) + dc_width / 2, 4.2) for dc in range(min(c.datacenters, 4))]
        for a, b in zip(gws, gws[1:]):
            edges["scale-across"].append((*a, *b))
    widths = {"scale-up": 6, "scale-out": 3, "spine": 4, "scale-across": 6}
    for tier, segs in edges.items():
        if not segs:
            continue
        u = utilisation.get(tier, 0.0)
        xs, ys = [], []
        for x1, y1, x2, y2 in segs:
            xs += [x1, x2, None]
            ys += [y1, y2, None]
        name = f"{TIER_LABELS[tier]}: {u:.0%} busy" + (f" — {hot_note}" if tier == hot and hot_note else "")
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, hoverinfo="name",
                                 line=dict(color=_util_color(u / peak), width=widths[tier] * (2 if tier == hot else 1))))
    u_up = utilisation.get("scale-up", 0.0)
    name = f"{TIER_LABELS['scale-up']}: {u_up:.0%} busy" + (f" — {hot_note}" if hot == "scale-up" and hot_note else "")
    fig.add_trace(go.Scatter(
        x=xs_nodes, y=ys_nodes, mode="markers+text", text=node_text, textposition="bottom center",
        marker=dict(symbol="square", size=34, color=_util_color(u_up / peak),
                    line=dict(color="#B00" if hot == "scale-up" else "#333", width=3 if hot == "scale-up" else 1)),
        hovertext=node_hover, hoverinfo="text", name=name))
    for x, y, t in labels:
        fig.add_annotation(x=x, y=y, text=t, showarrow=False, font=dict(size=font_size - 1, color="#333"))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), font=dict(size=font_size),
                      xaxis=dict(visible=False), yaxis=dict(visible=False, range=[-0.3, 4.7 if c.datacenters > 1 else 3.5]),
                      legend=dict(orientation="h", yanchor="top", y=-0.02, x=0), plot_bgcolor="white")
    return fig
