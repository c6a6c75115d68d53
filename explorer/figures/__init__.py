"""Plotly figures of a simulated iteration (no Streamlit here: the app only places them).

- :func:`gantt` — lanes = GPU class x stream, bars coloured by operation kind (charts.py);
- :func:`breakdown` — where the slowest class's iteration goes (charts.py);
- :func:`memory` — per-GPU memory by kind for each class against capacity (charts.py);
- :func:`topology` — the cluster and how busy each tier is (topology.py).
"""
from .charts import (CATEGORY_COLORS, KIND_COLORS, TIER_LABELS, GanttInfo, breakdown, gantt,  # noqa: F401
                     memory)
from .topology import topology  # noqa: F401
