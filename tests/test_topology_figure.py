"""The topology figure: only existing tiers, absolute colours, GPUs and groups on small clusters."""
from __future__ import annotations

import itertools
import re
from functools import cache

import plotly.graph_objects as go
import pytest

from explorer.figures.topology import topology, utilisation_color
from explorer.network.placement import Placement
from explorer.scenario import Scenario, load
from explorer.simulate import simulate

from conftest import ROOT

GREY = (205, 205, 205)
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
# Small clusters beyond the presets: several nodes, two datacenters of one node, TP/CP groups.
VARIANTS = {
    "4 nodes, TP 2": ("teaching-8gpu", {"cluster.nodes": 4, "parallelism.tp": 2, "parallelism.dp": 4,
                                        "training.global_batch": 32}),
    "2 datacenters of one node": ("teaching-8gpu", {"cluster.nodes": 2, "cluster.datacenters": 2,
                                                    "parallelism.pp": 2, "parallelism.dp": 8,
                                                    "training.global_batch": 32}),
    "TP 2 x CP 2 on 2 nodes": ("teaching-8gpu", {"cluster.nodes": 2, "parallelism.cp": 2, "parallelism.tp": 2,
                                                 "parallelism.pp": 2, "parallelism.dp": 2}),
    "TP outermost": ("teaching-8gpu", {"parallelism.tp": 2, "parallelism.pp": 2, "parallelism.dp": 2,
                                       "parallelism.order": "dp-pp-cp-tp"}),
}


@cache
def scenario(name: str) -> Scenario:
    base, overrides = VARIANTS.get(name, (name, {}))
    return load(ROOT / "scenarios" / f"{base}.yaml", overrides)


@cache
def util(name: str) -> tuple[tuple[str, float], ...]:
    return tuple(simulate(scenario(name)).utilisation.items())


def figure(name: str, utilisation: dict[str, float] | None = None, **kw) -> go.Figure:
    return topology(scenario(name), dict(util(name)) if utilisation is None else utilisation, **kw)


def role(fig: go.Figure, r: str, **meta) -> list:
    """Traces whose ``meta`` has role ``r`` and the given keys."""
    return [t for t in fig.data
            if t.meta and t.meta.get("role") == r and all(t.meta.get(k) == v for k, v in meta.items())]


def rgb(color: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", color)[:3])


def bbox(t) -> tuple[float, float, float, float]:
    return min(t.x), min(t.y), max(t.x), max(t.y)


def rects(fig: go.Figure) -> list[tuple[float, float, float, float]]:
    """Every drawn box: filled traces and layout rectangles (datacenter frames, TP outlines)."""
    return [bbox(t) for t in role(fig, "box")] + [(s.x0, s.y0, s.x1, s.y1) for s in fig.layout.shapes
                                                  if s.type == "rect"]


def segments(fig: go.Figure, roles=("link", "group")) -> list[tuple[float, float, float, float]]:
    out = []
    for t in fig.data:
        if t.meta and t.meta.get("role") in roles:
            pts = list(zip(t.x, t.y, strict=True))
            out += [(*a, *b) for a, b in itertools.pairwise(pts) if None not in (a[0], b[0])]
    return out


def inside(x: float, y: float, r: tuple[float, float, float, float], eps: float = 1e-9) -> bool:
    return r[0] - eps <= x <= r[2] + eps and r[1] - eps <= y <= r[3] + eps


def on_segment(x: float, y: float, s: tuple[float, float, float, float]) -> bool:
    (x0, y0, x1, y1) = s
    cross = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)
    return abs(cross) < 1e-9 and inside(x, y, (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))


def drawn_tiers(fig: go.Figure) -> set[str]:
    tiers = {t.meta["tier"] for t in role(fig, "link")} | {
        t.legendgroup for t in role(fig, "box")
        if t.legendgroup in ("scale-up", "scale-out", "spine", "scale-across")}
    return tiers | {t.meta["tier"] for t in role(fig, "legend") if "tier" in t.meta}


def tier_colors(fig: go.Figure, tier: str) -> set[str]:
    """Colours of everything drawn for ``tier``: its links and the boxes filled with its colour."""
    return ({t.line.color for t in role(fig, "link", tier=tier)}
            | {t.fillcolor for t in role(fig, "box") if t.legendgroup == tier})


# ---------------------------------------------------------------- the default preset, GPU by GPU
def test_one_node_draws_no_spine_leaf_or_wan():
    fig = figure("teaching-8gpu")
    assert drawn_tiers(fig) == {"scale-up"}
    assert not role(fig, "box", kind="spine") and not role(fig, "box", kind="leaf")
    texts = " ".join(a.text for a in fig.layout.annotations).lower()
    assert "spine" not in texts and "leaf" not in texts and "wan" not in texts


def test_one_node_draws_every_gpu_with_its_stage_and_dp_pairs():
    sc = scenario("teaching-8gpu")
    fig = figure("teaching-8gpu")
    gpus = role(fig, "box", kind="gpu")
    assert len(gpus) == 8
    fill = {int(re.search(r"GPU (\d+)", t.text).group(1)): t.fillcolor for t in gpus}
    pl = Placement.for_scenario(sc)
    stage_of = {pl.gpu(dp=r, pp=p): p for r in range(sc.dp) for p in range(4)}
    assert len(set(fill.values())) == 4                      # four pipeline stages, four fills
    for g, p in stage_of.items():
        assert fill[g] == fill[pl.gpu(pp=p)]                 # same stage, same fill
    hovers = {t.text for t in gpus}
    assert any("DP rank 1" in h and "PP stage 3" in h for h in hovers)
    boxes = {g: bbox(t) for g, t in zip(fill, gpus, strict=True)}
    pairs = []
    for x0, y0, x1, y1 in segments(fig, ("group",)):
        a = next(g for g, r in boxes.items() if inside(x0, y0, r))
        b = next(g for g, r in boxes.items() if inside(x1, y1, r))
        pairs.append(tuple(sorted((a, b))))
    expected = sorted(tuple(sorted((pl.gpu(dp=0, pp=p), pl.gpu(dp=1, pp=p)))) for p in range(4))
    assert sorted(pairs) == expected                         # the four DP pairs, nothing else
    legend = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert sum(n.startswith("PP stage") for n in legend) == 4 and any("DP group" in n for n in legend)


def test_pipedream_replicas_draw_every_gpu_on_its_stage():
    """PipeDream's 15-1 (stage_replicas [15, 1] on 16 GPUs): 16 GPU boxes, 15 filled as stage 0
    (GPUs 0-14, replica_groups.replica_gpu), GPU 15 as stage 1, and stage 0's replicas joined as
    one data-parallel group (14 segments along the chain)."""
    fig = figure("pipedream-vgg16")
    gpus = role(fig, "box", kind="gpu")
    assert len(gpus) == 16
    fill = {int(re.search(r"GPU (\d+)", t.text).group(1)): t.fillcolor for t in gpus}
    assert sorted(fill) == list(range(16))
    assert len({fill[g] for g in range(15)}) == 1 and fill[15] != fill[0]
    assert any("DP rank 14" in t.text and "PP stage 0" in t.text for t in gpus)
    assert len(segments(fig, ("group",))) == 14


def test_gpu_labels_carry_their_ranks():
    sc = scenario("TP 2 x CP 2 on 2 nodes")
    pl = Placement.for_scenario(sc)
    labels = {a.text for a in figure("TP 2 x CP 2 on 2 nodes").layout.annotations}
    g = pl.gpu(tp=1, cp=1, dp=1, pp=1)
    assert f"GPU {g}<br>TP1 CP1<br>DP1 PP1" in labels


# ---------------------------------------------------------------- absolute colours
def test_colour_of_a_nearly_idle_tier_is_grey_whatever_the_others_do():
    quiet = {"scale-up": 0.02, "scale-out": 0.02, "spine": 0.0, "scale-across": 0.0}
    busy = {"scale-up": 0.02, "scale-out": 0.02, "spine": 0.9, "scale-across": 0.95}
    for name in ("teaching-8gpu", "two-datacenters"):
        a, b = figure(name, quiet), figure(name, busy)
        for tier in ("scale-up", "scale-out") if name == "two-datacenters" else ("scale-up",):
            assert tier_colors(a, tier) == tier_colors(b, tier) == {utilisation_color(0.02)}
    assert all(abs(v - g) <= 8 for v, g in zip(rgb(utilisation_color(0.02)), GREY, strict=True))
    assert rgb(utilisation_color(0.0)) == GREY


def test_saturated_is_red_and_overload_is_clamped_but_printed():
    r, g, b = rgb(utilisation_color(1.0))
    assert r >= 150 and g < 40 and b < 40
    fig = figure("two-datacenters", {"scale-up": 0.1, "scale-out": 1.48, "spine": 1.0, "scale-across": 0.0})
    assert tier_colors(fig, "scale-out") == tier_colors(fig, "spine") == {utilisation_color(1.0)}
    names = [t.name for t in role(fig, "legend", tier="scale-out")]
    assert names and "148%" in names[0]


def test_colour_scale_is_visible_with_percentages():
    (bar,) = role(figure("teaching-8gpu"), "colorscale")
    m = bar.marker
    assert m.showscale and (m.cmin, m.cmax) == (0, 1)
    assert (m.colorscale[0][1] == "rgb({},{},{})".format(*GREY)
            and rgb(m.colorscale[-1][1]) == rgb(utilisation_color(1)))
    assert "0 %" in m.colorbar.ticktext[0] and "100 %" in m.colorbar.ticktext[-1]


def test_legend_gives_each_tier_its_percentage_and_names_the_hot_one():
    fig = figure("llama3-405b-16k", {"scale-up": 0.1, "scale-out": 0.5, "spine": 0.02, "scale-across": 0.0},
                 hot="scale-out", hot_note="limits DP")
    names = {t.meta["tier"]: t.name for t in role(fig, "legend") if "tier" in t.meta}
    assert set(names) == {"scale-up", "scale-out", "spine"}
    assert "10%" in names["scale-up"] and "2%" in names["spine"]
    assert "50%" in names["scale-out"] and "limits DP" in names["scale-out"]
    hot, = role(fig, "link", tier="scale-out")[:1]
    cold, = role(fig, "link", tier="spine")[:1]
    assert hot.line.width > cold.line.width


# ---------------------------------------------------------------- only tiers that exist
def test_two_datacenters_draws_the_wan_between_two_gateways():
    fig = figure("two-datacenters")
    assert drawn_tiers(fig) == {"scale-up", "scale-out", "spine", "scale-across"}
    assert len(role(fig, "box", kind="gateway")) == 2
    assert any("WAN" in a.text and "Gb/s" in a.text for a in fig.layout.annotations)


def test_one_leaf_block_has_no_spine():
    fig = figure("fsdp-llama3-8b")                           # 8 nodes under one leaf block
    assert drawn_tiers(fig) == {"scale-up", "scale-out"}
    assert not role(fig, "box", kind="spine")


def test_16k_gpus_render_collapsed_with_counts_of_what_is_hidden():
    fig = figure("llama3-405b-16k")
    assert not role(fig, "box", kind="gpu")
    assert 1 < len(role(fig, "box", kind="node")) <= 12
    more = [a.text for a in fig.layout.annotations if a.text.startswith("+")]
    assert "+29<br>more" in more                             # 32 nodes per leaf block, 3 shown
    assert "+61 more blocks" in more                         # 64 leaf blocks, 3 shown
    assert len(fig.data) < 60


@pytest.mark.parametrize("name", SHIPPED + list(VARIANTS))
def test_every_line_and_label_has_both_ends_on_drawn_elements(name):
    fig = figure(name)
    boxes = rects(fig)
    segs = segments(fig)
    # One node whose groups are the node itself draws no line (a serving replica of TP 8 on its node).
    assert segs or name in ("teaching-8gpu", "zero-bubble-8gpu", "serve-llama3-70b-tp8", "serve-3d-dram")
    for x0, y0, x1, y1 in segs:
        assert any(inside(x0, y0, r) for r in boxes), (name, x0, y0)
        assert any(inside(x1, y1, r) for r in boxes), (name, x1, y1)
    for a in fig.layout.annotations:
        assert any(inside(a.x, a.y, r) for r in boxes) or any(on_segment(a.x, a.y, s) for s in segs), a.text


@pytest.mark.parametrize("size", [12, 18])
def test_font_size_is_respected(size):
    fig = figure("two-datacenters", font_size=size, height=720)
    assert fig.layout.height == 720 and fig.layout.font.size == size and fig.layout.legend.font.size == size
    assert all(size - 1 <= a.font.size <= size for a in fig.layout.annotations)
    assert fig.layout.plot_bgcolor == "white"
