"""The communication-dimension registry (explorer/dimensions.py): the shared words, the colours of
both palettes, the Gantt's lanes and bands, the advice and the views are derived from it, and one
entry is all a new dimension needs for every view to know it."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import fields

import pytest

from explorer import dimensions, vocabulary
from explorer.figures.gantt import BAND_OFFSETS, KIND_ORDER
from explorer.teaching import explain, timeline_story
from explorer.ui import controls

from conftest import ROOT


def test_the_shared_words_are_the_registrys():
    assert vocabulary.COMM_DIMS == dimensions.reported() == ("tp", "cp", "ep", "pp", "dp", "emb", "gnn")
    assert vocabulary.BLOCKING_DIMS == dimensions.blocking() == ("tp", "cp", "ep")
    assert vocabulary.STREAMS == ("compute", "tp", "cp", "ep", "pp", "dp", "emb", "gnn")
    assert vocabulary.CATEGORIES == ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "emb", "gnn",
                                     "bubble", "optimizer")
    assert {d: vocabulary.KIND_COLORS[d] for d in vocabulary.COMM_DIMS} == {
        "tp": "#54A24B", "cp": "#72B7B2", "ep": "#FF9DA6", "pp": "#9D755D", "dp": "#E45756",
        "emb": "#17BECF", "gnn": "#B6992D"}
    assert all(vocabulary.CATEGORY_COLORS[d] == dimensions.get(d).color for d in vocabulary.COMM_DIMS)
    assert timeline_story.BLOCKING_LANES == frozenset(dimensions.blocking())
    assert BAND_OFFSETS["dp"] == (-0.37, 0.16) and BAND_OFFSETS["pp"] == (0.37, 0.16)
    assert KIND_ORDER[-7:] == vocabulary.COMM_DIMS


def test_emb_is_drawn_on_its_own_lane_and_grouped_with_dp():
    """The embedding exchange (explorer/workloads/dlrm/) spans the data-parallel group and is not
    a blocking dimension: a pipelined exchange runs on its own stream (taskgraph/edges.py)."""
    assert dimensions.group_of("emb") == "dp" and dimensions.group_of("dp") == "dp"
    assert "emb" not in vocabulary.BLOCKING_DIMS and BAND_OFFSETS["emb"] == (0.37, 0.16)
    assert vocabulary.PRESENT_COLORS["#17BECF"] == "#88CCEE"


def test_gnn_is_drawn_on_its_own_lane_and_grouped_with_dp():
    """A GNN's feature fetch and halo exchange (explorer/workloads/gnn/) span the data-parallel
    group (the graph's partitions are the replicas) and run on their own stream when overlapped."""
    assert dimensions.group_of("gnn") == "dp" and "gnn" not in vocabulary.BLOCKING_DIMS
    assert BAND_OFFSETS["gnn"] == (0.37, 0.16) and vocabulary.PRESENT_COLORS["#B6992D"] == "#DDCC77"


def test_edp_is_reported_as_dp_with_dps_advice():
    assert dimensions.reported_as("edp") == "dp" and dimensions.reported_as("tp") == "tp"
    assert "edp" not in vocabulary.COMM_DIMS
    assert explain.BY_DIMENSION["edp"] == explain.BY_DIMENSION["dp"] == dimensions.get("dp").remedy
    assert explain.shorter("edp", "scale-out").startswith("overlapping it with the backward")


def test_every_presentation_colour_is_okabe_ito_and_one_hex_has_one_counterpart():
    """Okabe & Ito (2008): the eight colours of the palette (and a light grey for the bubble), and
    Paul Tol's muted indigo, wine, teal, olive (the offload lane), cyan (emb) and sand (gnn) beyond
    eight.  A dimension whose colour a tier or kind shares must map it the same way (dp and scale-across)."""
    okabe_ito = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
                 "#999999", "#DDDDDD", "#332288", "#882255", "#44AA99", "#999933", "#88CCEE", "#DDCC77"}
    used = (set(vocabulary.KIND_COLORS.values()) | set(vocabulary.CATEGORY_COLORS.values())
            | set(vocabulary.TIER_COLORS.values()))
    assert used <= set(vocabulary.PRESENT_COLORS)
    assert set(vocabulary.PRESENT_COLORS.values()) <= okabe_ito
    for d in dimensions.DIMENSIONS.values():
        assert vocabulary.PRESENT_COLORS[d.color] == d.present_color, d.name
    wan = vocabulary.TIER_COLORS["scale-across"]
    assert vocabulary.PRESENT_COLORS[wan] == dimensions.get("dp").present_color


def test_the_sidebar_labels_the_degrees_from_the_registry():
    labels = {c.key: c.label for _, section in controls.SECTIONS for c in section}
    assert labels["parallelism.tp"] == "Tensor parallel (tp)"
    assert labels["parallelism.pp"] == "Pipeline stages (pp)"
    assert labels["parallelism.ep"] == "Expert parallel (ep)"


def test_unknown_names_are_one_line_errors():
    known = r"known: tp, cp, ep, pp, dp, edp, pair, emb, emb_node, emb_across, gnn$"
    with pytest.raises(ValueError, match=r"^unknown communication dimension 'gnm'; " + known):
        dimensions.get("gnm")
    with pytest.raises(ValueError, match="unknown view 'gant'"):
        dimensions.shown_in("gant")


def test_a_dimension_record_names_what_the_brief_asks_for():
    names = {f.name for f in fields(dimensions.Dimension)}
    assert {"name", "label", "color", "present_color", "blocking", "counts_as", "band", "views"} <= names


HARD_CODED = ("explorer/vocabulary.py", "explorer/figures/gantt.py", "explorer/figures/traffic.py",
              "explorer/figures/design.py", "explorer/figures/datacenters.py", "explorer/ui/export.py",
              "explorer/ui/views/timeline.py", "explorer/ui/views/topology.py",
              "explorer/teaching/explain.py", "explorer/teaching/timeline_story.py")


@pytest.mark.parametrize("path", HARD_CODED)
def test_no_view_keeps_its_own_list_of_dimensions(path):
    """No literal tuple, set, list or dict of two or more dimension names (a second copy of the list)
    and no comparison with one in the modules that had them."""
    known = set(dimensions.DIMENSIONS)
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    lists = [n for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List, ast.Set, ast.Dict))
             and sum(isinstance(e, ast.Constant) and e.value in known
                     for e in (n.keys if isinstance(n, ast.Dict) else n.elts)) >= 2]
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)
                and any(isinstance(c, ast.Constant) and c.value in known for c in (n.left, *n.comparators))]
    assert [ast.unparse(n)[:80] for n in lists + compares] == []


def test_the_registry_imports_nothing_of_explorer():
    """It sits in the foundations layer: config and everything above may import it."""
    tree = ast.parse((ROOT / "explorer" / "dimensions.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                and (getattr(n, "level", 0) or any(a.name.startswith("explorer") for a in n.names))]


# One new entry, made before anything else reads the registry (as a line in DIMENSIONS would be).
NEW_DIMENSION = """
import json
import explorer.dimensions as d
d.DIMENSIONS["toy"] = d.Dimension("toy", "Toy exchange", "#BCBD22", "#CC6677", True,
                                  "fewer or smaller toy messages")
from explorer import load, simulate, vocabulary as v
from explorer.figures import traffic, datacenters
from explorer.figures.gantt import BAND_OFFSETS, KIND_ORDER
from explorer.teaching import explain, timeline_story
fig = traffic.traffic_by_tier({"dp": {"scale-out": 2e9}, "toy": {"scale-up": 1e9, "scale-across": 1e9}})
r = simulate(load(sys_argv_scenario))
print(json.dumps({
    "comm": v.COMM_DIMS, "blocking": v.BLOCKING_DIMS, "streams": v.STREAMS, "categories": v.CATEGORIES,
    "part": v.CATEGORY_OF_PART["toy"], "lane": v.LANE_OF["toy"], "kind_color": v.KIND_COLORS["toy"],
    "present": v.PRESENT_COLORS["#BCBD22"], "band": BAND_OFFSETS["toy"], "order": KIND_ORDER[-1],
    "advice": explain.BY_DIMENSION["toy"], "story": sorted(timeline_story.BLOCKING_LANES),
    "traffic_rows": list(fig.data[0].y), "wan": datacenters.crossing_dims({"toy": {"scale-across": 1.0}}),
    "breakdown": r.breakdown_s, "iteration": r.iteration_time_s, "bytes": r.comm_bytes_per_gpu,
}))
"""


def test_a_new_dimension_is_one_registry_entry():
    script = NEW_DIMENSION.replace("sys_argv_scenario", repr(str(ROOT / "scenarios" / "teaching-8gpu.yaml")))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["comm"] == ["tp", "cp", "ep", "pp", "dp", "emb", "gnn", "toy"]
    assert got["blocking"] == ["tp", "cp", "ep", "toy"] and got["story"] == ["cp", "ep", "toy", "tp"]
    assert got["streams"][-1] == "toy" and got["categories"][-3:] == ["toy", "bubble", "optimizer"]
    assert (got["part"], got["lane"]) == ("toy", "toy")
    assert (got["kind_color"], got["present"]) == ("#BCBD22", "#CC6677")
    assert got["band"] == [0.0, 0.5] and got["order"] == "toy"
    assert got["advice"] == "fewer or smaller toy messages"
    assert got["traffic_rows"] == ["dp", "toy"] and got["wan"] == ["toy"]
    # The simulator counts it (nothing of this model sends on it: zero) and its categories still sum
    # to the iteration.
    assert got["breakdown"]["toy"] == 0.0 and got["bytes"]["toy"] == 0.0
    assert sum(got["breakdown"].values()) == pytest.approx(got["iteration"], rel=1e-12)


def test_no_two_kinds_a_gantt_shows_share_a_presentation_colour():
    """In presentation mode ep, recompute and DualPipe's F&B were all #CC79A7 and compress was tp's
    green: a slide could not tell them apart.  Every kind keeps its own colour (embedding/logits is
    forward work and is drawn as forward on purpose)."""
    kinds = {k: c for k, c in vocabulary.KIND_COLORS.items() if k != "embedding/logits"}
    present = [vocabulary.PRESENT_COLORS[c] for c in kinds.values()]
    assert len(set(present)) == len(present), dict(zip(kinds, present, strict=True))
