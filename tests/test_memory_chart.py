"""The Memory tab's peak chart (figures/charts.memory): columns for short class names, rows with
each name written above its bar for long ones (mixed generations), the same numbers either way."""
from __future__ import annotations

from explorer.figures.charts import VERTICAL_LABEL_CHARS, memory

CLASSES = [{"params": 4.0, "grads": 8.0, "optimizer": 1.0, "activations": 22.5, "reserved": 1.5},
           {"params": 4.0, "grads": 8.0, "optimizer": 1.0, "activations": 10.0, "reserved": 1.5}]


def _bars(fig):
    return [t for t in fig.data if t.type == "bar"]


def test_short_names_stand_as_columns_under_a_capacity_line():
    fig = memory(CLASSES, ["stage 0", "stage 1"], 80.0)
    bars = _bars(fig)
    assert {b.orientation for b in bars} == {None}
    assert list(bars[0].x) == ["stage 0", "stage 1"]
    act = next(b for b in bars if b.name == "activations")
    assert list(act.y) == [22.5, 10.0]
    assert [s.y0 for s in fig.layout.shapes] == [80.0]          # the capacity, horizontal
    assert fig.layout.height == 380


def test_long_names_lie_as_rows_each_named_above_its_bar():
    names = ["stage 0 · hopper · H100 SXM", "stage 0 · blackwell · B200"]
    assert min(len(n) for n in names) > VERTICAL_LABEL_CHARS
    fig = memory(CLASSES, names, 85.9, height=340, font_size=18)
    bars = _bars(fig)
    assert {b.orientation for b in bars} == {"h"}
    act = next(b for b in bars if b.name == "activations")
    assert list(act.x) == [22.5, 10.0] and list(act.customdata) == names
    assert [s.x0 for s in fig.layout.shapes] == [85.9]          # the capacity, vertical
    texts = [a.text for a in fig.layout.annotations]
    assert all(n in texts for n in names)
    assert fig.layout.yaxis.showticklabels is False
    assert fig.layout.height >= 340                             # grows with the rows


def test_the_memory_tabs_reading_says_what_an_fp32_run_holds():
    """The Memory tab's "How to read this" said bf16 weights and 12 bytes of Adam state for every
    run; an fp32 run (the shipped GNN) holds fp32 weights and 8 bytes of moments."""
    from app_support import run_app
    text = " ".join(str(m.value) for m in run_app(scenario="gnn-sage-papers100m", view="memory").markdown)
    assert "fp32 weights and gradients" in text and "8 bytes per parameter" in text
    text = " ".join(str(m.value) for m in run_app(scenario="teaching-8gpu", view="memory").markdown)
    assert "bf16 weights and gradients" in text and "12 bytes per parameter" in text
