"""Plotly figures of a simulated iteration (no Streamlit here: the app only places them).

- :func:`gantt` — lanes = GPU class x stream, bars coloured by operation kind (gantt.py);
- :func:`breakdown` — where the slowest class's iteration goes (charts.py);
- :func:`memory` — per-GPU memory by kind for each class against capacity (charts.py);
- :func:`topology` — the cluster and how busy each tier is (topology.py);
- :func:`datacenter_map` — datacenters and the WAN links between them, bytes and utilisation
  per link (datacenters.py);
- :func:`traffic_by_tier`, :func:`zero_tradeoff` — bytes per dimension and tier, ZeRO's trade-off
  (traffic.py).
"""
from .charts import CATEGORY_COLORS, KIND_COLORS, TIER_LABELS, breakdown, memory  # noqa: F401
from .datacenters import MAX_MAP_DATACENTERS, datacenter_map  # noqa: F401
from .gantt import GanttInfo, gantt  # noqa: F401
from .of_run import GanttDraw, gantt_of, hot_tier, memory_span  # noqa: F401
from .topology import topology  # noqa: F401
from .traffic import traffic_by_tier, zero_tradeoff  # noqa: F401
