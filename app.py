"""CommExplorer — the Streamlit app: change the scenario, see the timeline and the bottleneck.

Run with ``streamlit run app.py``.  The page lives in ``explorer/ui/`` (state, sidebar, one module
per view); all physics lives in the rest of ``explorer/``, which never imports Streamlit.
"""
from explorer.ui.page import run

run()
