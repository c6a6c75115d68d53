"""The Traffic tab: bytes each GPU sends per dimension and tier, and ZeRO's memory-traffic trade-off."""
from __future__ import annotations

import json
from typing import Any

import streamlit as st

from ... import figures, vocabulary
from ...figures.fonts import PRESENT_FONT_PX
from ...numbers import figure
from ...scenario import ScenarioError, apply_overrides, from_dict
from ..cache import ViewData, summary
from ..export import chart

TIERS = vocabulary.TIERS


def _gb(x: float) -> str:
    """GB with two decimals, three significant digits below 0.01 (a GNN's 2.14 MB read "0.00")."""
    return figure(x / 1e9, 2, small=0.01) if x else "–"


def zero_points(raw: dict[str, Any]) -> tuple[list[dict], list[str]]:
    """The scenario at ZeRO stages 0-3 (what is invalid at a stage is skipped, with its reason)."""
    points, skipped = [], []
    for z in range(4):
        variant = apply_overrides(raw, {"parallelism.zero": z})
        try:
            from_dict(variant)
        except ScenarioError as exc:
            skipped.append(f"ZeRO {z}: {exc}")
            continue
        j = summary(json.dumps(variant, sort_keys=True, default=str))
        points.append({"zero": z, "memory_GB": j.memory_GB,
                       "dp_GB": j.comm_bytes_per_gpu["dp"] / 1e9, "iteration_s": j.iteration_time_s})
    return points, skipped


def render(data: ViewData, raw: dict[str, Any], present: bool) -> None:
    j = data.summary
    font = PRESENT_FONT_PX if present else 12
    by_tier = j.comm_bytes_by_tier
    left, right = st.columns(2, gap="medium")
    with left:
        st.markdown("**Bytes each GPU sends per iteration**")
        if by_tier:
            chart(figures.traffic_by_tier(by_tier, font_size=font,
                                          scale_up_kind=data.scenario.cluster.scale_up.kind),
                  key="traffic", present=present,
                            config={"displaylogo": False})
        rows = []
        for dim, total in j.comm_bytes_per_gpu.items():
            row = {"dimension": dim, "bus GB (nccl-tests)": _gb(total)}
            for tier in TIERS:
                row[f"{tier} GB"] = _gb(by_tier.get(dim, {}).get(tier, 0.0))
            rows.append(row)
        st.dataframe(rows, hide_index=True)
    with right:
        st.markdown("**ZeRO stages: memory against traffic** (iteration time under each stage)")
        points, skipped = zero_points(raw)
        chart(figures.zero_tradeoff(points, j.memory_capacity_GB, j.layout.zero,
                                    font_size=font), key="zero", present=present)
        for s in skipped:
            st.caption(s)
    if not present:
        with st.expander("How to read this"):
            st.markdown(
                "- **Bus GB** counts each call as nccl-tests does (all-reduce 2(n-1)/n of the buffer, "
                "all-gather/reduce-scatter (n-1)/n, all-to-all (n-1)/n, send/recv the message): the bytes "
                "a GPU puts on the wire per iteration.\n"
                "- **Per tier**: of those bytes, how many leave the GPU over NVLink (scale-up), leave the "
                "node through its NICs (scale-out), leave the leaf block over the spine, and leave the "
                "datacenter over the WAN. Which tier a dimension loads is decided by rank placement "
                "(`parallelism.order`).\n"
                "- **ZeRO**: stage 1 shards the optimizer state, 2 also the gradients, 3 also the weights — "
                "memory falls, and stage 3 re-gathers every layer's weights for forward and backward, "
                "3Ψ bytes per micro-batch against 2Ψ per iteration when gradients travel in bf16 "
                "(Rajbhandari et al. SC20; Megatron reduces them in fp32, which weighs the reduce-scatter "
                "double).")
