"""The Serving tab (issue 37): the latency-throughput curve of a serving scenario over its batch,
its knee, the scenario's own point, and the requests/s a TPOT target allows; the points as a
table.  Shown only for serving scenarios (:func:`labels`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from ...figures.fonts import PRESENT_FONT_PX
from ...figures.serving import serving_curve_figure
from ...scenario import Scenario
from ..export import chart

KEY, LABEL = "serving", "Serving curve"


def labels(all_labels: dict[str, str], sc: Scenario) -> dict[str, str]:
    """The page's tabs without this one unless ``sc`` serves (has an ``inference`` section)."""
    return {k: v for k, v in all_labels.items() if k != KEY or sc.inference is not None}


def target_sentence(f: Mapping[str, Any]) -> str:
    """What the latency targets allow, in one line ('' without a target)."""
    tpot, ttft = f.get("tpot_target_s"), f.get("ttft_target_s")
    if tpot is None and ttft is None:
        return ""
    named = " and ".join(([f"TPOT {tpot * 1e3:,.4g} ms"] if tpot is not None else [])
                         + ([f"mean TTFT {ttft * 1e3:,.4g} ms"] if ttft is not None else []))
    # Only batches that fit are answers (serving/result.py): a miss says so, as the CLI's does.
    if f.get("max_batch") == 0:
        return (f"**Target {named} is missed: no batch fits in memory** (0 requests/s) — more GPUs per "
                "replica, lower-precision weights and KV cache or shorter requests would make room.")
    if f["target_batch"] is None:
        fit = f" that fits in memory (1 to {f['max_batch']:,})" if f.get("max_batch") else ""
        return (f"**Target {named} is missed at every batch{fit}**: no batch meets it on this layout — "
                "fewer GPUs per all-reduce, faster links or more prefill replicas would.")
    # A request-length mix's prefills differ by kind: its queue is M/G/1 (serving/targets.py).
    model = "M/G/1" if f.get("mix") else "M/D/1"
    queue = (f" (the mean TTFT counts the wait for a prefill under Poisson arrivals, {model})"
             if ttft is not None else "")
    return (f"**Target {named}**: batch **{f['target_batch']:,}** per replica serves the most within "
            f"it, **{f['requests_per_s_at_target']:,.2f} requests/s**{queue} "
            f"(the configured batch {f['batch']:,}: {f['requests_per_s']:,.2f} requests/s at "
            f"{f['tpot_s'] * 1e3:,.2f} ms).")


def render(f: Mapping[str, Any] | None, present: bool) -> None:
    """The tab for run --json's ``inference`` object ``f``."""
    if f is None:
        st.info("This scenario trains: the serving curve belongs to a scenario with an `inference:` "
                "section (choose Serving above the scenario list).")
        return
    font = PRESENT_FONT_PX if present else 12
    chart(serving_curve_figure(f, height=380 if present else 400, font_size=font), key="serving_curve",
          present=present)
    said = target_sentence(f)
    knee = (f"Knee at batch **{f['knee_batch']:,}**: up to it each doubling of the batch grows TPOT by "
            f"at most √2, so it buys at least as much throughput as it costs in latency; beyond it, "
            f"latency grows faster. Memory allows batch {f['max_batch']:,}.")
    st.markdown(knee + (f"  \n{said}" if said else ""))
    if present:
        return
    st.dataframe([{"batch": p["batch"], "TPOT (ms)": round(p["tpot_s"] * 1e3, 2),
                   "TTFT (ms)": round(p["ttft_s"] * 1e3, 1),
                   "output tokens/s per GPU": round(p["output_tokens_per_s_per_gpu"]),
                   "requests/s": round(p["requests_per_s"], 2)} for p in f["batch_curve"]],
                 hide_index=True, width="stretch")
    with st.expander("How to read this"):
        st.markdown(
            "Each point is this deployment with the batch (sequences decoding together per replica) "
            "doubled from 1 up to what the KV cache allows. Small batches are **latency-bound**: each "
            "decode step reads every weight once and runs its all-reduces on a few kilobytes, so "
            "doubling the batch nearly doubles throughput at almost the same TPOT. Large batches are "
            "bound by the GEMMs, the KV-cache reads and the all-reduce bytes, so TPOT grows with the "
            "batch. Set a **TPOT target** in the sidebar (Serving) to read the requests/s it allows.")
