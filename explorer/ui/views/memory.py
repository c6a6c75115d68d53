"""The Memory tab: per-GPU memory of each pipeline stage against the GPU's capacity — at its peak,
by kind, and over the iteration on the Gantt's time axis (activations growing through the warm-up
and draining in the cool-down)."""
from __future__ import annotations

import streamlit as st

from ... import figures
from ...figures.fonts import PRESENT_FONT_PX
from ...figures.memory_timeline import memory_timeline_figure
from ...figures.of_run import memory_span
from ..cache import ViewData
from ..export import chart


def render(data: ViewData, present: bool) -> None:
    j = data.summary
    bars, over_time = st.columns([2, 3], gap="medium")
    with bars:
        st.markdown("**At the peak, by kind**")
        chart(figures.memory(list(data.memory), list(data.names), j.memory_capacity_GB,
                             height=340 if present else 380, font_size=PRESENT_FONT_PX if present else 12),
              key="memory", present=present, config={"displaylogo": False})
    with over_time:
        _over_time(data, present)
    mem, cap = j.memory_GB, j.memory_capacity_GB
    if mem > cap:
        st.warning(f"The fullest stage needs {mem:.1f} GB per GPU, more than the {cap:.1f} GB of the GPU: "
                   "raise tp or pp, shard with ZeRO, or recompute activations.", icon="⚠️")
    if not present:
        with st.expander("How to read this"):
            fp32 = data.scenario.training.dtype == "fp32"
            states = ("fp32 weights and gradients and Adam's two fp32 moments (8 bytes per parameter; "
                      "no master copy: the weights are it)" if fp32 else
                      "bf16 weights and gradients (fp32 gradients under Megatron-Core), fp32 master "
                      "weights and Adam's moments (12 bytes per parameter)")
            st.markdown(
                f"Per-GPU memory of each pipeline stage: {states}, "
                "each divided across the data-parallel group as the ZeRO "
                "stage says (stage 1: optimizer, 2: + gradients, 3: + weights), and activations at the peak "
                "of the stage's schedule — with 1F1B the first stage holds `pp` micro-batches in flight, "
                "with GPipe all of them (Korthikanti et al. 2022 for the bytes per layer). FP8 runs add "
                "their recipe's FP8 weight copies and scaling state to the weights; FSDP2 under a "
                "pipeline keeps the stage's weights gathered and its gradients unsharded for the step. "
                "The Traffic tab shows what each ZeRO stage costs in bytes sent.")


def _over_time(data: ViewData, present: bool) -> None:
    """Memory over the iteration per stage (explorer/result/memory_timeline.py)."""
    j = data.summary
    st.markdown("**Over the iteration** (same time axis as the Gantt)")
    curves = data.memory_curves
    if not curves:
        st.caption("No pipeline passes to follow in this run.")
        return
    span = memory_span(curves, data.fold, j.iteration_time_s)   # the Gantt's axis, folded or not
    chart(memory_timeline_figure(curves, span, j.memory_capacity_GB, height=340 if present else 380,
                                 font_size=PRESENT_FONT_PX if present else 12),
          key="memory_timeline", present=present, config={"displaylogo": False})
    first = curves[0]
    caption = (f"{first.name}: {first.peak_activations / 1e9:.2f} GB of activations at most in flight "
               f"on top of {first.static / 1e9:.2f} GB of weights, gradients and optimizer state.")
    if data.fold is not None:
        caption += " The steady state is folded here as in the Gantt."
    if data.scenario.training.offload_activations_layers:
        caption += (" Offloaded layers' activations leave the GPU when their copy to the host ends and "
                    "come back when the copy back starts (the Gantt's offload lane): the drops and "
                    "steps of the curve.")
    if not present:
        caption += (" A forward stores its activations layer by layer and the pass that completes its "
                    "gradients frees them layer by layer"
                    + ("; switch the schedule to gpipe to see them pile up, to 1f1b to see them bounded."
                       if data.scenario.parallelism.pp > 1 else
                       ": with one stage, each micro-batch's rise and fall is one tooth of the curve."))
    st.caption(caption)
