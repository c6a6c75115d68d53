"""The words every stage shares: streams (Gantt lanes), breakdown categories, network tiers, and
the colours they are drawn in.  One place, so that the analysis, the timeline, the figures and the
app cannot drift apart (a new dimension or category is added here once).
"""
from __future__ import annotations

# Communication dimensions, in the order they are reported.
COMM_DIMS = ("tp", "cp", "ep", "pp", "dp")
# Collectives that block the compute stream (issued between the GEMMs of a layer).
BLOCKING_DIMS = ("tp", "cp", "ep")
# Streams of a GPU class, as lanes of the Gantt chart and threads of the trace.
STREAMS = ("compute",) + COMM_DIMS
# Breakdown categories of an iteration; they sum to the iteration time (analysis/breakdown.py).
CATEGORIES = ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "bubble", "optimizer")
# Which category a part of a task's duration counts in.
CATEGORY_OF_PART = {"compute": "compute", "weight-grad": "compute", "recompute": "recompute", "tp": "tp",
                    "cp": "cp", "ep": "ep", "pp": "pp", "dp": "dp", "optimizer": "optimizer"}
# Which lane a part is drawn on.
LANE_OF = {"compute": "compute", "recompute": "compute", "optimizer": "compute", "weight-grad": "compute",
           "tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dp": "dp"}
# Network tiers (topology.Fabric boundaries), innermost first, and how the page names them.
TIERS = ("scale-up", "scale-out", "spine", "scale-across")
TIER_LABELS = {"scale-up": "NVLink / NVSwitch (scale-up)", "scale-out": "node NICs → leaf (scale-out)",
               "spine": "leaf → spine uplinks", "scale-across": "WAN between datacenters (scale-across)"}

# Colours (Tableau 10, distinguishable in print and on a projector).
KIND_COLORS = {
    "forward": "#4C78A8", "backward": "#F58518", "weight-grad": "#EECA3B", "recompute": "#B279A2",
    "tp": "#54A24B", "cp": "#72B7B2", "ep": "#FF9DA6", "pp": "#9D755D", "dp": "#E45756",
    "optimizer": "#79706E", "embedding/logits": "#4C78A8", "F&B": "#8F6BB3", "compress": "#3A8E7E",
}
CATEGORY_COLORS = {"compute": "#4C78A8", "recompute": "#B279A2", "tp": "#54A24B", "cp": "#72B7B2",
                   "ep": "#FF9DA6", "pp": "#9D755D", "dp": "#E45756", "bubble": "#D3D3D3",
                   "optimizer": "#79706E"}
TIER_COLORS = {"scale-up": "#4C78A8", "scale-out": "#F58518", "spine": "#B279A2", "scale-across": "#E45756"}
