"""An unexpected error on the page: logged with its traceback under an id, shown as that id and a
one-line apology (never a traceback on the page)."""
from __future__ import annotations

import logging
import uuid

import streamlit as st

LOG = logging.getLogger("commexplorer")


def internal_error(where: str) -> None:
    """Log the traceback with an id; show the id and a one-line apology."""
    ref = uuid.uuid4().hex[:8]
    LOG.exception("internal error %s while %s", ref, where)
    st.error(f"Internal error while {where} (id {ref}). The details are in the server log; the scenario "
             "link above reproduces it.", icon="🛑")
