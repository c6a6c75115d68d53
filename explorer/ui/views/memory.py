"""The Memory tab: per-GPU memory of each pipeline stage against the GPU's capacity."""
from __future__ import annotations

import streamlit as st

from ... import figures
from ..cache import ViewData
from ..export import chart


def render(data: ViewData, present: bool) -> None:
    j = data.json
    chart(figures.memory(list(data.memory), list(data.names), j["memory_capacity_GB"],
                                   height=360 if present else 380, font_size=15 if present else 12),
                    key="memory", present=present, config={"displaylogo": False})
    mem, cap = j["memory_GB"]["total"], j["memory_capacity_GB"]
    if mem > cap:
        st.warning(f"The fullest stage needs {mem:.1f} GB per GPU, more than the {cap:.1f} GB of the GPU: "
                   "raise tp or pp, shard with ZeRO, or recompute activations.", icon="⚠️")
    if not present:
        with st.expander("How to read this"):
            st.markdown(
                "Per-GPU memory of each pipeline stage: bf16 weights and gradients, fp32 optimizer state "
                "(12 bytes per parameter for Adam), each divided across the data-parallel group as the ZeRO "
                "stage says (stage 1: optimizer, 2: + gradients, 3: + weights), and activations at the peak "
                "of the stage's schedule — with 1F1B the first stage holds `pp` micro-batches in flight, "
                "with GPipe all of them (Korthikanti et al. 2022 for the bytes per layer). The Traffic tab "
                "shows what each ZeRO stage costs in bytes sent.")
