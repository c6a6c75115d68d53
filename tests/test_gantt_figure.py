"""The Gantt shows what the text names (issue 7.7): every kind the timeline holds has a legend
entry and, where it takes time, bars; lane labels keep the ×N multiplicity; compute hovers describe
work, not empty byte fields."""
from __future__ import annotations

from itertools import pairwise

import pytest

from explorer.figures import gantt
from explorer.figures.gantt import _rasterize, lane_name
from explorer.result.timeline import build_timeline
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT


def figure(name: str, max_bars: int = 2500, **overrides):
    res = simulate(load(ROOT / "scenarios" / f"{name}.yaml", overrides))
    labels = tuple(c.label for c in res.classes)
    tl = build_timeline(res.tasks, labels, max_segments=max_bars)
    lanes = tuple(lane_name(c.name, c.gpus) for c in res.classes)
    fig, info = gantt(tl.columns, lanes, res.iteration_time_s, max_bars=max_bars)
    return res, tl, fig, info


def test_lane_names_keep_the_multiplicity():
    assert lane_name("stage 0", 2) == "stage 0 ×2"
    assert lane_name("stage 3 · DC 1", 256) == "stage 3 · DC 1 ×256"
    _, _, fig, _ = figure("teaching-8gpu")
    ticks = fig.layout.yaxis.ticktext
    assert ticks and all("×2" in t for t in ticks)


def test_aggregated_chart_still_draws_the_tp_collectives_the_sentence_names():
    """megatron-gpt3-175b: TP is a visible share of the iteration, the chart is aggregated (too
    many per-layer bars), and tp must still have drawn bars, not only a legend entry."""
    res, _, fig, info = figure("megatron-gpt3-175b")
    assert info.merged
    assert res.breakdown_s["tp"] / res.iteration_time_s > 0.03
    tp = [t for t in fig.data if t.name == "tp"]
    assert tp and len([x for x in tp[0].x if x]) > 10


def test_every_kind_in_the_timeline_has_a_legend_entry():
    _, tl, fig, _ = figure("deepseek-v3")
    kinds = set(tl.columns["kind"])
    assert kinds <= {t.name for t in fig.data}


def test_compute_hovers_describe_the_work_not_empty_bytes():
    _, _, fig, info = figure("teaching-8gpu", max_bars=10**6)
    assert not info.merged
    fwd = next(t for t in fig.data if t.name == "forward")
    assert "bytes" not in fwd.hovertemplate and "tier" not in fwd.hovertemplate
    assert all(row[6] for row in fwd.customdata)          # FLOPs or memory-bound text, never blank
    dp = next(t for t in fig.data if t.name == "dp")
    assert all("GB" in row[6] or "MB" in row[6] or "KB" in row[6] for row in dp.customdata)


def test_rasterize_keeps_sparse_communication_but_not_sparse_compute():
    """A row busy 10% of a column: drawn (faint) if it is communication, left empty if compute."""
    rows = [(("c", "comm"), "tp", 0.0, 0.1, True), (("c", "compute"), "forward", 0.0, 0.1, False)]
    out = _rasterize(rows, 1.0, 1)
    assert [(r[0][1], r[1]) for r in out] == [("comm", "tp")]
    assert out[0][5] == pytest.approx(0.1)


def test_hidden_ring_attention_transfers_are_visible_on_the_cp_lane():
    """long-context-cp moves tens of GB of K/V per GPU, hidden under attention on NVLink: the cp
    lane shows them (hatched, at least a couple of pixels wide) with their true duration on hover."""
    res, _, fig, info = figure("long-context-cp")
    assert res.comm_bytes_per_gpu["cp"] > 10e9
    cp = next(t for t in fig.data if t.name == "cp (overlapped)")
    assert cp.marker.pattern.shape == "/" and cp.marker.pattern.fillmode == "overlay"   # stripes over colour
    assert len(cp.x) >= 32 and min(cp.x) >= 0.002 * res.iteration_time_s * 1e3
    assert all(row[5] < x for row, x in zip(cp.customdata, cp.x, strict=True))      # true duration is shorter


@pytest.mark.parametrize("pp,every", [(8, True), (64, False)])
@pytest.mark.slow
def test_band_labels_thin_out_when_the_stages_would_overlap(pp, every):
    """Eight stages are each labelled; 64 stages in at most 600 px would print labels on top of
    each other (the Korthikanti 1T row), so every k-th is, the first and last kept, each label at
    least 1.5 lines of its font apart."""
    _, _, fig, _ = figure("megatron-gpt3-175b", **{"parallelism.pp": pp, "model.layers": 128,
                                                   "cluster.nodes": 16 * pp})
    vals = list(fig.layout.yaxis.tickvals)
    assert vals[0] == 0 and vals[-1] == pp - 1
    assert (len(vals) == pp) == every
    font = fig.layout.yaxis.tickfont.size
    gap = min(b - a for a, b in pairwise(vals)) if len(vals) > 1 else pp
    assert gap * (fig.layout.height - 110) / pp >= 1.5 * font - 1e-9


# The plain loop explorer/figures/raster.py replaced (issue 32: 0.37 s of DeepSeek-V3's 1 s page
# build); the vectorised one must give the same tuples, floats included.
def reference_rasterize(rows: list[tuple], iteration_s: float, bins: int) -> list[tuple]:
    """Aggregate bars the way pixels would: split the iteration into ``bins`` columns; in each row
    and column keep the kind that occupies it most and fuse runs of equal columns.  A compute row's
    column is kept if at least a third of it is busy, a communication row's if any of it is.
    ``rows``: (row_key, kind, start_s, end_s, is_comm_row).  Returns (row_key, kind, start_s, end_s,
    operations, fill) with operations = bars that started in the run and fill = its busy share."""
    width = iteration_s / bins
    occ: dict[tuple, dict[str, float]] = {}
    starts: dict[tuple, int] = {}
    comm_rows = set()
    for key, kind, s, e, comm in rows:
        if comm:
            comm_rows.add(key)
        b0, b1 = int(s / width), min(int(e / width), bins - 1)
        starts[(key, b0)] = starts.get((key, b0), 0) + 1
        for b in range(b0, b1 + 1):
            overlap = min(e, (b + 1) * width) - max(s, b * width)
            if overlap > 0:
                cell = occ.setdefault((key, b), {})
                cell[kind] = cell.get(kind, 0.0) + overlap
    out: list[list] = []
    for (key, b) in sorted(occ, key=lambda kb: (str(kb[0]), kb[1])):
        cell = occ[(key, b)]
        busy = min(sum(cell.values()) / width, 1.0)
        if busy < (1e-6 if key in comm_rows else 1 / 3):
            continue
        kind = max(cell, key=lambda k: (cell[k], k))
        ops = starts.get((key, b), 0)
        last = out[-1] if out else None
        if last and last[0] == key and last[1] == kind and abs(last[3] - b * width) < width * 1e-6:
            n = (last[3] - last[2]) / width
            last[5] = (last[5] * n + busy) / (n + 1)
            last[3] = (b + 1) * width
            last[4] += ops
        else:
            out.append([key, kind, b * width, (b + 1) * width, ops, busy])
    return [tuple(x) for x in out]


def _random_rows(seed: int) -> tuple[list[tuple], float]:
    import random

    rng = random.Random(seed)
    T = rng.choice([1.0, 0.37, 12.5])
    keys = [(c, lane) for c in range(rng.randint(1, 4)) for lane in ("compute", "tp", "dp", "comm")]
    rows = []
    for _ in range(rng.randint(1, 400)):
        key = rng.choice(keys)
        s = rng.uniform(0, T)
        e = min(T, s + rng.choice([rng.uniform(0, T / 50), rng.uniform(0, T / 3), 0.0]))
        rows.append((key, rng.choice(["forward", "backward", "tp", "dp", "optimizer"]), s, e,
                     key[1] != "compute"))
    return rows, T


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_raster_equals_the_loop(seed):
    rows, T = _random_rows(seed)
    for bins in (1, 7, 100, 800):
        assert _rasterize(rows, T, bins) == reference_rasterize(rows, T, bins)


def test_vectorised_raster_equals_the_loop_on_a_real_timeline():
    """DeepSeek-V3's folded timeline, the rows the aggregated Gantt draws."""
    from explorer.config.shipped import shipped_scenarios
    from explorer.result.timeline import build_timeline
    from explorer.simulate import simulate

    res = simulate(load(shipped_scenarios()["deepseek-v3"]))
    cols = build_timeline(res.tasks, tuple(c.label for c in res.classes)).columns
    rows = [((cols["gpu_class"][i], cols["lane"][i]), cols["kind"][i], cols["start_s"][i], cols["end_s"][i],
             cols["lane"][i] != "compute") for i in range(len(cols["start_s"]))]
    assert len(rows) > 10_000
    got = _rasterize(rows, res.iteration_time_s, 800)
    assert got == reference_rasterize(rows, res.iteration_time_s, 800) and len(got) > 100
