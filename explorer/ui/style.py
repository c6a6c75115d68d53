"""Page CSS: compact cards that never truncate, and a presentation mode for a 1280x720 projector."""
from __future__ import annotations

import streamlit as st

BASE = """
<style>
.block-container {padding-top: 2.4rem; padding-bottom: 0.5rem;}
[data-testid="stMetric"] {padding: 4px 8px;}
[data-testid="stMetricValue"] {font-size: clamp(1rem, 1.45vw, 1.35rem);}
[data-testid="stMetricValue"] > div {overflow: visible; text-overflow: clip;}
[data-testid="stMetricLabel"] p {font-size: clamp(0.72rem, 0.95vw, 0.85rem); white-space: normal;
                                 overflow: visible; line-height: 1.15;}
[data-testid="stMetricLabel"] > div {overflow: visible;}
[data-testid="stMetric"] {min-height: 100%;}
[data-testid="stMetricDelta"] {font-size: 0.75rem;}
</style>"""

# Presentation: the header bar hidden (its 60 px are the screen's scarcest; the sidebar's opener
# pinned to the top-left corner), the title larger than
# the tabs but without Streamlit's 16-px padding above and below it (with a tour's one-line bar the
# Gantt otherwise ends below 720 px), cards and chart fonts readable from the back of a room.
PRESENT = """
<style>
header[data-testid="stHeader"] {height: 0; min-height: 0; background: transparent;}
/* The collapsed sidebar's only opener sat in the zero-height header, half above the screen (a hunt):
   pinned to the corner, the page's left padding making room for it. */
[data-testid="stExpandSidebarButton"] {position: fixed; top: 0.35rem; left: 0.3rem; z-index: 1000;}
.block-container {padding-top: 0; padding-left: 2.4rem; padding-right: 1.2rem;}
.block-container [data-testid="stHeadingWithActionElements"] h2 {font-size: 2rem !important;
    padding: 0.1rem 0 !important; line-height: 1.2;}
[data-testid="stMetricValue"] {font-size: clamp(1.3rem, 2.1vw, 2rem);}
[data-testid="stMetricLabel"] p {font-size: clamp(0.85rem, 1.15vw, 1.1rem);}
[data-testid="stMetricDelta"] {font-size: 0.85rem;}
.stTabs [data-baseweb="tab"] p {font-size: 1.05rem;}
[data-testid="stAlert"] p {font-size: 1.08rem; line-height: 1.35;}
.st-key-tour_bar [data-testid="stExpander"] summary p {font-size: 1.05rem; white-space: nowrap;
                                                        overflow: hidden; text-overflow: ellipsis;}
.st-key-tour_bar [data-testid="stExpanderDetails"] p {font-size: 1.15rem; line-height: 1.4;}
</style>"""


def inject(present: bool) -> None:
    st.markdown(BASE + (PRESENT if present else ""), unsafe_allow_html=True)
