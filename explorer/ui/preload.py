"""Every module the app's session threads would import lazily, imported once when the page module is.

Streamlit runs each browser session's script in a thread of its own, so on a fresh server the
first sessions import pandas, pyarrow, Plotly's trace classes and the rest at the same moment.  An
``import`` statement waits for a module another thread is still initialising, but Plotly and
Streamlit also look optional modules up in ``sys.modules`` directly, without the import lock
(``_plotly_utils.optional_imports.get_module("pandas", should_load=False)`` in Plotly's
validators and JSON encoder): one session's chart code then finds pandas half-initialised by
another's thread and fails on ``pd.Series`` — 3 internal errors among 16 concurrent users on a
fresh server (issue 32).  :func:`load_all` runs while ``explorer.ui.page`` is being imported, under
that module's import lock, so every session thread starts its page only after all of them are
complete.  tests/test_app_imports.py checks that this covers every lazy import of the app's modules.
"""
from __future__ import annotations

import importlib
import pkgutil

# Modules the views reach lazily.  Third-party: pandas and pyarrow (st.dataframe converts through
# them), PIL.Image, numpy and pandas (peeked by Plotly's validators and JSON encoder), orjson
# (Plotly's JSON engine), networkx (explorer/network/topology.py imports it inside functions, to keep the
# CLI's start fast), plotly.io/subplots.  Ours: the modules imported inside functions (to keep
# the CLI fast or to break an import cycle) by modules the app imports.
HEAVY = ("numpy", "pandas", "pyarrow", "PIL.Image", "orjson", "networkx",
         "plotly.graph_objects", "plotly.subplots", "plotly.io", "plotly.io._json", "plotly.io._utils",
         "plotly.colors", "plotly.offline",
         "explorer.simulate", "explorer.design.consensus", "explorer.estimate.many",
         "explorer.teaching.bubble",
         "explorer.config.sync_rules", "explorer.config.wan_rules",
         # a serving scenario's run
         "explorer.serving.deploy", "explorer.serving.load", "explorer.serving.result")
# Chart export (PNG/SVG): the app works without them (explorer/ui/export.py says so on the page).
OPTIONAL = ("kaleido", "plotly.io._kaleido")
# The trace types explorer/figures draws (go.<Trace>), and the layout: Plotly imports each
# property's class (plotly.graph_objs.bar.marker._line, ...) on first use, so all of them now.
PLOTLY_PACKAGES = ("bar", "scatter", "heatmap", "waterfall", "layout")


def load_all() -> list[str]:
    """Import :data:`HEAVY`, whichever of :data:`OPTIONAL` are installed, and every submodule of
    :data:`PLOTLY_PACKAGES`; return the names imported (about 560 modules, ~1 s on a cold start)."""
    done = [importlib.import_module(name).__name__ for name in HEAVY]
    for name in OPTIONAL:
        try:
            done.append(importlib.import_module(name).__name__)
        except ImportError:
            pass
    for pkg in PLOTLY_PACKAGES:
        root = importlib.import_module(f"plotly.graph_objs.{pkg}")
        done.append(root.__name__)
        for info in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
            done.append(importlib.import_module(info.name).__name__)
    return done
