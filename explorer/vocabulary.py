"""The words every stage shares: streams (Gantt lanes), breakdown categories, network tiers, and
the colours they are drawn in.  One place, so that the analysis, the timeline, the figures and the
app cannot drift apart.  The communication dimensions' part of each is derived from the dimension
registry (explorer/dimensions.py): a new dimension is one entry there, a new category one here.
"""
from __future__ import annotations

from . import dimensions

# Communication dimensions, in the order they are reported.
COMM_DIMS = dimensions.reported()
# Collectives that block the compute stream (issued between the GEMMs of a layer).
BLOCKING_DIMS = dimensions.blocking()
# Streams of a GPU class, as lanes of the Gantt chart and threads of the trace.
STREAMS = ("compute",) + COMM_DIMS
# The copy-engine lane of activation offloading (training.offload_activations_layers): the
# device-to-host copies after offloaded layers' forwards and the host-to-device copies before their
# backwards.  Not a stream of the engine (the copies' stall is inside the passes' compute), a lane
# the timeline draws from the passes' offload annotation (engine.records.PassInfo.offload).
OFFLOAD = "offload"
# Breakdown categories of an iteration; they sum to the iteration time (analysis/breakdown.py).
CATEGORIES = ("compute", "recompute") + COMM_DIMS + ("bubble", "optimizer")
# Which category a part of a task's duration counts in.
CATEGORY_OF_PART = {"compute": "compute", "weight-grad": "compute", "recompute": "recompute",
                    **{d: d for d in COMM_DIMS}, "optimizer": "optimizer"}
# Which lane a part is drawn on.
LANE_OF = {"compute": "compute", "recompute": "compute", "optimizer": "compute", "weight-grad": "compute",
           **{d: d for d in COMM_DIMS}}
# Network tiers (topology.Fabric boundaries), innermost first, and how the page names them.
TIERS = ("scale-up", "scale-out", "spine", "scale-across")
# Not a tier: what a page names as the limit of a call whose GPUs' PCIe links to their NICs set its
# time (network/collectives.CollectiveCost.limited_by); its bytes stay on the tiers it crosses.
PCIE_LIMIT = "pcie"
# ... and of a call whose latency is at least half its time: its outermost tier with this suffix
# ("scale-across latency"); strip it for the tier itself (:func:`tier_of_limit`).
LATENCY_SUFFIX = " latency"


def tier_of_limit(limit: str) -> str:
    """The fabric tier a call's limit (CollectiveCost.limited_by) is about: "scale-across" for
    "scale-across latency", "scale-out" for "pcie" (the links lead to the node's NICs), else itself."""
    if limit == PCIE_LIMIT:
        return "scale-out"
    return limit.removesuffix(LATENCY_SUFFIX)
TIER_LABELS = {"scale-up": "NVLink / NVSwitch (scale-up)", "scale-out": "node NICs → leaf (scale-out)",
               "spine": "leaf → spine uplinks", "scale-across": "WAN between datacenters (scale-across)",
               PCIE_LIMIT: "GPU PCIe links → NICs"}


def tier_label(tier: str, scale_up_kind: str | None = None) -> str:
    """How the page names ``tier``: the scale-up tier by the links it is made of (a PCIe node's is
    not NVLink: a hunt found pipedream-vgg16's V100 PCIe boxes labelled "NVLink / NVSwitch")."""
    if tier.endswith(LATENCY_SUFFIX):               # a call's limit: its outermost tier's latency
        return f"{tier_label(tier_of_limit(tier), scale_up_kind)}: latency"
    if tier == "scale-up" and scale_up_kind == "pcie":
        return "PCIe in the node (scale-up)"
    return TIER_LABELS.get(tier, tier)

# Colours (Tableau 10, distinguishable in print and on a projector); the dimensions' are theirs.
_DIM_COLORS = {d: dimensions.get(d).color for d in COMM_DIMS}
KIND_COLORS = {
    "forward": "#4C78A8", "backward": "#F58518", "weight-grad": "#EECA3B", "recompute": "#B279A2",
    **_DIM_COLORS,
    "optimizer": "#79706E", "embedding/logits": "#4C78A8", "F&B": "#8F6BB3", "compress": "#3A8E7E",
    OFFLOAD: "#BAB0AC",
}
CATEGORY_COLORS = {"compute": "#4C78A8", "recompute": "#B279A2", **_DIM_COLORS, "bubble": "#D3D3D3",
                   "optimizer": "#79706E", OFFLOAD: "#BAB0AC"}
TIER_COLORS = {"scale-up": "#4C78A8", "scale-out": "#F58518", "spine": "#B279A2", "scale-across": "#E45756"}
# Presentation mode's palette: each app colour's colour-blind-safe counterpart, from Okabe & Ito's
# eight ("Color Universal Design", 2008) and, where a Gantt shows more kinds side by side than
# eight, Paul Tol's "muted" scheme (Tol 2021, "Colour Schemes", SRON/EPS/TN/09-002: #332288,
# #882255, #44AA99, #999933), so no two kinds of one chart share a colour.  Kinds, categories and tiers
# share hexes, so one colour has one counterpart (a dimension's colour shared with a tier must have
# the tier's: tests/test_dimensions.py).
PRESENT_COLORS = {"#4C78A8": "#0072B2", "#F58518": "#E69F00", "#EECA3B": "#F0E442", "#B279A2": "#CC79A7",
                  "#79706E": "#000000", "#8F6BB3": "#332288", "#3A8E7E": "#44AA99", "#D3D3D3": "#DDDDDD",
                  "#E45756": "#D55E00", "#BAB0AC": "#999933",   # offload: olive, not grey
                  **{dimensions.get(d).color: dimensions.get(d).present_color for d in COMM_DIMS}}
