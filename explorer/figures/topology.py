"""The cluster drawn as a network, every tier coloured by how busy it is on an absolute scale.

Small clusters (:data:`DETAIL_MAX_NODES` nodes and :data:`DETAIL_MAX_GPUS` GPUs at most) are drawn
GPU by GPU: each box carries its parallel ranks, is filled by pipeline stage, tensor-parallel groups
are outlined and data-/context-parallel groups joined by lines.  Larger clusters are collapsed to
datacenters -> spine -> leaf blocks -> nodes with "+N more" boxes.  Only tiers that exist are drawn,
and every link joins two drawn boxes.  No Streamlit here: the app only places the figure.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import plotly.graph_objects as go

from ..network.placement import Placement
from ..network.replica_groups import replica_gpu
from ..network.topology import Fabric
from ..scenario import Scenario
from ..variants.hetero import dc_gpu
from ..vocabulary import tier_label

DETAIL_MAX_NODES, DETAIL_MAX_GPUS = 4, 32
# ColorBrewer OrRd with a light-grey start: lightness falls monotonically from idle to saturated,
# so the ramp still reads as an order under every colour-vision deficiency (and in greyscale).
UTIL_STOPS = ((0.0, (205, 205, 205)), (0.25, (253, 204, 138)), (0.5, (252, 141, 89)),
              (0.75, (227, 74, 51)), (1.0, (179, 0, 0)))
# Paul Tol's "light" scheme without its orange, pink and grey, which the utilisation ramp uses.
STAGE_COLORS = ("#77AADD", "#EEDD88", "#44BB99", "#CCBBEE", "#99DDFF", "#BBCC33", "#AAAA00")
TIER_WIDTH = {"scale-up": 4, "scale-out": 3, "spine": 4, "scale-across": 5}
KIND_NAMES = {"nvswitch": "NVSwitch", "nvlink-ring": "NVLink ring", "pcie": "PCIe"}
LEVEL_GAP, LEVEL_H = 0.8, 0.55  # vertical room between tiers and height of a switch box (data units)


def utilisation_color(u: float) -> str:
    """The absolute colour of a busy fraction: 0 light grey (idle) ... 1 dark red (saturated).

    Values outside 0..1 are clamped (the figure prints the number itself).
    """
    u = min(max(u, 0.0), 1.0)
    for (u0, c0), (u1, c1) in itertools.pairwise(UTIL_STOPS):
        if u <= u1:
            f = (u - u0) / (u1 - u0)
            return "rgb({},{},{})".format(*(round(a + (b - a) * f) for a, b in zip(c0, c1, strict=True)))
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _Box:
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


class _Drawing:
    """Collects boxes (filled traces with hover), tier links and labels into one figure."""

    def __init__(self, utilisation: dict[str, float], hot: str | None, font_size: int,
                 scale_up_kind: str | None = None) -> None:
        self.fig, self.util, self.hot, self.fs = go.Figure(), utilisation, hot, font_size
        self.up_kind = scale_up_kind
        self.segs: dict[tuple[str, bool], list[tuple[float, float, float, float]]] = {}
        self.boxes: list[_Box] = []
        self.frames: list[_Box] = []  # datacenter outlines (layout shapes), kept for the axis ranges

    def box(self, b: _Box, kind: str, fill: str, label: str = "", hover: str = "", group: str | None = None,
            dash: str | None = None, border: str = "#444", width: float = 1.0, top: bool = False,
            label_bg: str | None = None) -> _Box:
        """Draw ``b`` filled; ``label`` centred (or top-left when ``top``), ``hover`` over the whole area."""
        self.boxes.append(b)
        self.fig.add_trace(go.Scatter(
            x=[b.x0, b.x1, b.x1, b.x0, b.x0], y=[b.y0, b.y0, b.y1, b.y1, b.y0], fill="toself", fillcolor=fill,
            mode="lines", line=dict(color=border, width=width, dash=dash), hoveron="fills", hoverinfo="text",
            text=hover or label.replace("<br>", " "), name=kind, legendgroup=group, showlegend=False,
            meta={"role": "box", "kind": kind}))
        if label:
            dark = fill.startswith("rgb(") and sum(map(int, fill[4:-1].split(","))) < 400
            self.fig.add_annotation(
                x=b.x0 + 0.08 if top else b.cx, y=b.y1 - 0.06 if top else b.cy, text=label, showarrow=False,
                xanchor="left" if top else "center", yanchor="top" if top else "middle", bgcolor=label_bg,
                font=dict(size=self.fs, color="white" if dark else "#111"))
        return b

    def tier_box(self, b: _Box, tier: str, kind: str, label: str, hover: str) -> _Box:
        """A box filled with the colour of ``tier`` (a node's NVSwitch), outlined thick when it is hot."""
        hot = tier == self.hot
        return self.box(b, kind, utilisation_color(self.util.get(tier, 0.0)), label, hover, group=tier,
                        border="#222" if hot else "#444", width=4 if hot else 1)

    def link(self, tier: str, child: _Box, parent: _Box, ghost: bool = False) -> None:
        """A ``tier`` link from the top of ``child`` up to the bottom of ``parent``."""
        x = min(max(child.cx, parent.x0 + 0.1), parent.x1 - 0.1)
        self.segs.setdefault((tier, ghost), []).append((child.cx, child.y1, x, parent.y0))

    def emit_links(self) -> None:
        """One trace per tier (and per real/ghost style), coloured on the absolute scale."""
        for (tier, ghost), segs in self.segs.items():
            u = self.util.get(tier, 0.0)
            xs = [v for x0, _, x1, _ in segs for v in (x0, x1, None)]
            ys = [v for _, y0, _, y1 in segs for v in (y0, y1, None)]
            self.fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", legendgroup=tier, showlegend=False, hoverinfo="text",
                text=f"{tier_label(tier, self.up_kind)}: {u:.0%} busy", name=tier,
                meta={"role": "link", "tier": tier},
                line=dict(color=utilisation_color(u), dash="dot" if ghost else None,
                          width=TIER_WIDTH[tier] * (2 if tier == self.hot else 1))))


def _gpu_grid(
    gpn: int, nodes: int, levels: float, ranks: int, height: int, font_size: int
) -> tuple[int, bool]:
    """GPU columns per node, and whether the "GPU n" line fits in a box above the ranks.

    Picks the grid whose boxes are largest among those where the label fits, assuming the plot
    gets ~900 px of width (1280 px screen less sidebar and colour bar) and ``height`` less the
    legend; ``levels`` is the height (data units) of what is stacked above the nodes.
    """
    plot_h = height - 2 * (font_size + 14) - 30
    best: tuple[tuple[bool, bool, float], int, bool] | None = None
    for cols in range(1, gpn + 1):
        rows = math.ceil(gpn / cols)
        w = 0.84 * 900 / (nodes * (cols + 0.9) + 1)           # box size in px
        h = 0.8 * plot_h / (rows + 2.4 + levels)
        for with_id in (True, False):
            # (At least one line: a serving replica of one GPU lists no rank dimension, and a box
            # without a label still needs the room of one: 0 lines had divided by zero.)
            lines = max(1, math.ceil(ranks / 2) + with_id)
            need_w = 0.55 * font_size * max(7 if ranks > 1 else 3,
                                            4 + len(str(gpn * nodes)) if with_id else 0)
            fit = min(w / need_w, h / (1.3 * font_size * lines))
            key = (fit >= 1, with_id, min(fit, 1.6) * (w * h) ** 0.5)  # fits, then richer label, then size
            best = max(best or (key, cols, with_id), (key, cols, with_id))
    assert best is not None                       # gpn >= 1: one grid at least
    return best[1], best[2]


def _snake(cell: tuple[int, int, int]) -> tuple[int, int, int]:
    """Boustrophedon order (odd rows right to left) so a group's chain never jumps across a node."""
    node, row, col = cell
    return node, row, -col if row % 2 else col


def _stage_color(stage: int) -> str:
    return STAGE_COLORS[stage % len(STAGE_COLORS)]


def _coordinates(sc: Scenario) -> tuple[dict[str, int], dict[int, tuple[int, int, int, int]]]:
    """Each dimension's size and every GPU's (tp, cp, dp, pp) ranks.  With PipeDream's stage
    replicas (``parallelism.stage_replicas``) the replicas of a stage are its data-parallel ranks,
    placed as the simulator places them (network/replica_groups.py: stage after stage, each
    replica a contiguous block of tp x cp GPUs, tp innermost), and dp is the most replicas."""
    reps = sc.parallelism.stage_replicas
    if not reps:
        pl = Placement.for_scenario(sc)
        sz = pl.sizes
        return sz, {pl.gpu(tp=t, cp=c, dp=r, pp=p): (t, c, r, p) for t in range(sz["tp"])
                    for c in range(sz["cp"]) for r in range(sz["dp"]) for p in range(sz["pp"])}
    tp, cp = sc.parallelism.tp, sc.parallelism.cp
    sz = {"tp": tp, "cp": cp, "dp": max(reps), "pp": len(reps)}
    return sz, {replica_gpu(sc, s, k) + c * tp + t: (t, c, k, s) for s, r in enumerate(reps)
                for k in range(r) for c in range(cp) for t in range(tp)}


def _draw_gpus(d: _Drawing, sc: Scenario, nodes: dict[int, _Box], cols: int, with_id: bool) -> None:
    """Each GPU of the detailed view: ranks as its label, filled by stage, TP outlined, DP/CP joined."""
    sz, coords = _coordinates(sc)
    gpn = sc.cluster.gpus_per_node
    dims = ("tp", "cp", "dp", "pp")
    groups: dict[str, list[list[int]]] = {}
    for i, dim in enumerate(dims):  # a group: the GPUs whose coordinates differ only in ``dim``
        by_rest: dict[tuple[int, ...], list[int]] = {}
        for g, co in sorted(coords.items(), key=lambda kv: kv[1][i]):
            by_rest.setdefault(co[:i] + co[i + 1:], []).append(g)
        groups[dim] = list(by_rest.values())
    mates = {(dim, g): grp for dim in ("tp", "cp", "dp") for grp in groups[dim] for g in grp}
    boxes: dict[int, _Box] = {}
    cell: dict[int, tuple[int, int, int]] = {}
    for g, (t, c, r, p) in sorted(coords.items()):
        node, local = divmod(g, gpn)
        row, col = divmod(local, cols)
        nb = nodes[node]
        x0, y1 = nb.x0 + 0.2 + col, nb.y1 - 0.6 - row
        cell[g] = (node, row, col)
        ranks = [f"{k.upper()}{v}" for k, v in zip(dims, (t, c, r, p), strict=True) if sz[k] > 1]
        pairs = [" ".join(ranks[i:i + 2]) for i in range(0, len(ranks), 2)]  # two ranks per line
        label = "<br>".join(([f"GPU {g}"] if with_id or not ranks else []) + pairs)
        hover = (f"GPU {g} (node {node}, local {local})<br>"
                 f"TP rank {t} · CP rank {c} · DP rank {r} · PP stage {p}"
                 + "".join(f"<br>{k.upper()} group: GPUs {', '.join(map(str, mates[k, g]))}"
                           for k in ("tp", "cp", "dp") if sz[k] > 1))
        boxes[g] = d.box(_Box(x0, y1 - 0.8, x0 + 0.84, y1), "gpu", _stage_color(p), label, hover,
                         group=f"stage {p}", label_bg=_stage_color(p))
    for dim, color, dash in (("dp", "#222", None), ("cp", "#555", "dot"), ("tp", "#000", "dash")):
        if sz[dim] <= 1:
            continue
        xs: list[float | None] = []
        ys: list[float | None] = []
        for members in groups[dim]:
            cells = {cell[g] for g in members}
            nodes_, rows, cols_ = ({c[i] for c in cells} for i in range(3))
            rect = len(nodes_) == 1 and len(cells) == len(rows) * len(cols_) == len(members)
            if dim == "tp" and rect:  # an outline reads as "these GPUs act as one" better than a line
                bs = [boxes[g] for g in members]
                d.fig.add_shape(type="rect", x0=min(b.x0 for b in bs) - 0.06, x1=max(b.x1 for b in bs) + 0.06,
                                y0=min(b.y0 for b in bs) - 0.06, y1=max(b.y1 for b in bs) + 0.06,
                                line=dict(color=color, width=2, dash=dash), layer="above", name="tp-group")
                continue
            for g in sorted(members, key=lambda g: _snake(cell[g])):
                xs.append(boxes[g].cx)
                ys.append(boxes[g].cy - 0.22)  # below the label so the line does not cross it
            xs.append(None)
            ys.append(None)
        if xs:
            d.fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers",
                                       line=dict(color=color, width=3, dash=dash),
                                       marker=dict(size=7, color=color), hoverinfo="skip", legendgroup=dim,
                                       showlegend=False, name=f"{dim} groups",
                                       meta={"role": "group", "dim": dim}))
    for s in range(sz["pp"]):
        d.fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"PP stage {s}",
                                   legendgroup=f"stage {s}",
                                   marker=dict(symbol="square", size=14, color=_stage_color(s),
                                               line=dict(width=1)),
                                   meta={"role": "legend"}))
    for dim, text, dash in (("tp", "TP group (dashed outline)", "dash"), ("dp", "DP group (joined)", None),
                            ("cp", "CP group (dotted)", "dot")):
        if sz[dim] > 1:
            d.fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=text, legendgroup=dim,
                                       line=dict(color="#222", width=3, dash=dash), meta={"role": "legend"}))


def topology(sc: Scenario, utilisation: dict[str, float], *, hot: str | None = None, hot_note: str = "",
             height: int = 460, font_size: int = 12) -> go.Figure:
    """The cluster of ``sc`` with each tier coloured by its average busy fraction in ``utilisation``.

    Colours are absolute (0 light grey, 1 red, the same in every figure; a colour bar gives the
    percentages).  ``hot`` — the tier limiting the largest exposed communication — is drawn thicker
    and named with ``hot_note`` in the legend.  Up to a few nodes every GPU is drawn with its ranks
    and groups; beyond, the first leaf blocks and nodes of each datacenter stand for the rest.
    """
    c = sc.cluster
    detailed = c.nodes <= DETAIL_MAX_NODES and c.gpus <= DETAIL_MAX_GPUS
    leaf_nodes = Fabric.for_cluster(c).leaf_nodes
    # Datacenters may differ in size (explorer/variants/hetero.py): the layout is sized for the largest.
    dcs, per_dc = c.datacenters, max(c.nodes_of(d) for d in range(c.datacenters))
    blocks = -(-per_dc // leaf_nodes)
    # Collapsed: a budget of roughly 14 node boxes across keeps labels legible at 1280 px.
    max_dcs, max_blocks, max_nodes = (10**9,) * 3 if detailed else ((2, 2, 2) if dcs > 1 else (1, 3, 3))
    ranks = sum(v > 1 for v in (sc.parallelism.tp, sc.parallelism.cp, sc.dp, sc.parallelism.pp))
    levels = (LEVEL_GAP + LEVEL_H) * ((per_dc > 1) + (blocks > 1) + 1.3 * (dcs > 1))
    cols, with_id = _gpu_grid(c.gpus_per_node, c.nodes, levels, ranks, height, font_size)
    rows = math.ceil(c.gpus_per_node / cols)
    node_w, node_h = (cols + 0.4, rows + 1.2) if detailed else (0.85, 0.7)
    y_leaf = node_h + LEVEL_GAP
    y_spine = y_leaf + (LEVEL_H + LEVEL_GAP if per_dc > 1 else 0)
    y_top = y_spine + (LEVEL_H if blocks > 1 else 0) if per_dc > 1 else node_h  # highest box inside a DC
    d = _Drawing(utilisation, hot, font_size, c.scale_up.kind)
    up, out, wan = c.scale_up, c.scale_out, c.scale_across
    up_note = f"{c.gpus_per_node} GPUs on {up.kind} ({(up.bandwidth_GBps or 0):g} GB/s per GPU)"
    nodes: dict[int, _Box] = {}
    gateways: list[_Box] = []
    x = 0.0
    for dc in range(min(dcs, max_dcs)):
        dc_x0, tops = x, []
        dc_nodes, first_node = c.nodes_of(dc), sum(c.nodes_of(e) for e in range(dc))
        dc_blocks = -(-dc_nodes // leaf_nodes)
        for b in range(min(dc_blocks, max_blocks)):
            here = min(leaf_nodes, dc_nodes - b * leaf_nodes)
            bx0, kids = x, []
            for k in range(min(here, max_nodes)):
                n = first_node + b * leaf_nodes + k
                nb = _Box(x, 0.0, x + node_w, node_h)
                hover = f"node {n}: {up_note}, {out.nics_per_node} x {out.nic_Gbps:g} Gb/s NICs"
                if detailed:
                    first = n * c.gpus_per_node
                    d.box(nb, "node", "white", f"node {n} · GPUs {first}–{first + c.gpus_per_node - 1}",
                          hover, top=True)
                    if c.gpus_per_node > 1:
                        sw = _Box(nb.x0 + 0.2, 0.15, nb.x1 - 0.2, 0.5)
                        busy = (f"{KIND_NAMES.get(up.kind, up.kind)} · "
                                f"{utilisation.get('scale-up', 0):.0%} busy")
                        d.tier_box(sw, "scale-up", "switch", busy, hover)
                else:
                    d.tier_box(nb, "scale-up", "node", f"node {n}", hover)
                nodes[n] = nb
                kids.append((nb, False))
                x += node_w + (0.5 if detailed else 0.15)
            if here > max_nodes:
                gb = d.box(_Box(x, 0.0, x + 0.85, node_h), "more", "white", f"+{here - max_nodes}<br>more",
                           f"{here - max_nodes} more nodes in leaf block {b}", dash="dot")
                kids.append((gb, True))
                x += 1.0
            if dc_nodes > 1:
                rail = f" · {out.nics_per_node} rail leaves" if out.kind == "rail-optimized" else ""
                leaf = d.box(_Box(bx0, y_leaf, x - 0.15, y_leaf + LEVEL_H), "leaf", "white",
                             f"leaf block {b} · {here} nodes", f"leaf block {b}: {here} nodes{rail}, "
                             f"{out.nics_per_node} x {out.nic_Gbps:g} Gb/s per node")
                for kid, ghost in kids:
                    d.link("scale-out", kid, leaf, ghost)
                tops.append((leaf, False))
            else:
                tops += kids
            x += 0.35
        if dc_blocks > max_blocks:
            more = dc_blocks - max_blocks
            tops.append((d.box(_Box(x, y_leaf, x + 1.6, y_leaf + LEVEL_H), "more", "white",
                               f"+{more} more blocks", f"{more} more leaf blocks", dash="dot"), True))
            x += 1.95
        top = tops[0][0]
        if dc_blocks > 1:
            top = d.box(_Box(dc_x0, y_spine, x - 0.35, y_spine + LEVEL_H), "spine", "white",
                        f"spine · {out.oversubscription:g}:1 oversubscribed", f"spine of datacenter {dc}")
            for kid, ghost in tops:
                d.link("spine", kid, top, ghost)
        if dcs > 1:
            frame = _Box(dc_x0 - 0.2, -0.25, x - 0.15, y_top + 0.75)
            d.frames.append(frame)
            d.fig.add_shape(type="rect", x0=frame.x0, x1=frame.x1, y0=frame.y0, y1=frame.y1, layer="below",
                            line=dict(color="#888", width=1, dash="dash"), name="datacenter")
            d.fig.add_annotation(x=frame.x0 + 0.1, y=frame.y1 - 0.05, showarrow=False,
                                 text=f"datacenter {dc} · {dc_nodes} node{'s' if dc_nodes > 1 else ''}"
                                      + (f" · {dc_gpu(sc, dc).name}" if c.datacenter_gpus else ""),
                                 xanchor="left", yanchor="top", font=dict(size=font_size, color="#444"))
            gw = d.box(_Box(top.cx - 0.9, y_top + 1.2, top.cx + 0.9, y_top + 1.2 + LEVEL_H), "gateway",
                       "white", "WAN gateway", f"datacenter {dc} gateway")
            d.link("scale-across", top, gw)
            gateways.append(gw)
        x += 0.6
    if dcs > max_dcs:
        y = y_top + 1.2
        gateways.append(d.box(_Box(x, y, x + 2.0, y + LEVEL_H), "more", "white", f"+{dcs - max_dcs} more DCs",
                              f"{dcs - max_dcs} more datacenters", dash="dot"))
    for ga, gb in itertools.pairwise(gateways):
        d.segs.setdefault(("scale-across", False), []).append((ga.x1, ga.cy, gb.x0, gb.cy))
        d.fig.add_annotation(x=(ga.x1 + gb.x0) / 2, y=ga.cy,
                             text=f"WAN {wan.bandwidth_Gbps:g} Gb/s · {wan.latency_ms:g} ms",
                             showarrow=False, bgcolor="white", yanchor="middle",
                             font=dict(size=font_size - 1))
    if detailed:
        _draw_gpus(d, sc, nodes, cols, with_id)
    d.emit_links()
    drawn = [t for t, present in (("scale-up", c.gpus_per_node > 1), ("scale-out", per_dc > 1),
                                  ("spine", blocks > 1), ("scale-across", dcs > 1)) if present]
    for tier in drawn:
        u = utilisation.get(tier, 0.0)
        name = f"{tier_label(tier, c.scale_up.kind)}: {u:.0%} busy" + (
            " (over 100 %: colour capped)" if u > 1 else "")
        if tier == hot:
            name += f" — {hot_note or 'limits the largest exposed communication'}"
        d.fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=name, legendgroup=tier,
                                   line=dict(color=utilisation_color(u),
                                             width=TIER_WIDTH[tier] * (2 if tier == hot else 1)),
                                   meta={"role": "legend", "tier": tier}))
    ticks = [0, 0.25, 0.5, 0.75, 1.0]
    d.fig.add_trace(go.Scatter(
        x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip", meta={"role": "colorscale"},
        marker=dict(color=[0.0], cmin=0, cmax=1, showscale=True,
                    colorscale=[[u, "rgb({},{},{})".format(*rgb)] for u, rgb in UTIL_STOPS],
                    colorbar=dict(title=dict(text="link busy<br>(average)", font=dict(size=font_size)),
                                  tickvals=ticks,
                                  ticktext=["0 % idle", "25 %", "50 %", "75 %", "100 % saturated"],
                                  tickfont=dict(size=font_size - 1), ticklabelposition="outside bottom",
                                  len=0.8, thickness=14))))
    xs = [v for b in d.boxes + d.frames for v in (b.x0, b.x1)]
    ys = [v for b in d.boxes + d.frames for v in (b.y0, b.y1)]
    d.fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), font=dict(size=font_size), paper_bgcolor="white",
        plot_bgcolor="white", hoverlabel=dict(font_size=font_size),
        xaxis=dict(visible=False, range=[min(xs) - 0.3, max(xs) + 0.3]),
        yaxis=dict(visible=False, range=[min(ys) - 0.3, max(ys) + 0.3]),
        legend=dict(orientation="h", yanchor="top", y=-0.01, x=0, font=dict(size=font_size)))
    return d.fig
