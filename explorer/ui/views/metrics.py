"""The row of metric cards above the views."""
from __future__ import annotations

import streamlit as st

from ... import dimensions
from ...numbers import figure
from ...report.cards import SERVING_CARDS, fmt_time, tpot_text
from ...workloads.registry import nouns, workload_for
from ..cache import ViewData
from ..summary import Summary


def render_serving(f: dict, present: bool = False) -> None:
    """The cards of a serving scenario (run --json's ``inference``; explorer/serving/result.py), and
    the bottleneck under them — not on a projector, whose one screen needs the room for the chart
    (the Timeline says the bottleneck beside the Gantt)."""
    cols = st.columns(6, gap="small")
    loaded = "arrival_rate" in f             # under an arrival rate (explorer/serving/load.py)
    cols[0].metric(SERVING_CARDS[0], fmt_time(f["ttft_s"]), border=True,
                   help="Time to first token: the prefill" + (", after the wait for it" if loaded else ""),
                   delta=f"wait {fmt_time(f['queue_wait_s'])}" if loaded else None, delta_color="off",
                   delta_arrow="off")
    cols[1].metric(SERVING_CARDS[1], tpot_text(f["tpot_s"]), border=True,
                   help="Time per output token, prefill interference included",
                   delta=f"step {fmt_time(f['decode_step_s'])}", delta_color="off", delta_arrow="off")
    cols[2].metric(SERVING_CARDS[2], f"{f['output_tokens_per_s_per_gpu']:,.0f}", border=True)
    cols[3].metric(SERVING_CARDS[3], f"{f['requests_per_s']:,.2f}", border=True,
                   help="the arrival rate, served" if loaded else f"bound by {f['bound']}",
                   delta=f"load {f['load']:.0%}" if loaded else None, delta_color="off", delta_arrow="off")
    cols[4].metric(SERVING_CARDS[4], f"{f['kv_cache_GB']:.1f} GB", border=True,
                   help="KV cache of the batch at full context on one decode GPU")
    cols[5].metric(SERVING_CARDS[5], f"{f['max_batch']:,}", border=True,
                   delta=f"batch {f['batch']:,}", delta_arrow="off",
                   delta_color="inverse" if f["batch"] > f["max_batch"] else "off")
    if not present:
        st.caption(f"Bottleneck — {f['bottleneck']}")


# From ten million a second (a DLRM's 15,226,053 samples/s) the rate is said in millions: ten
# digits and three commas do not fit a card on a 1280-px screen with the sidebar open.
COMPACT_RATE = 1e7


def rate_text(x: float) -> str:
    """A throughput for its card: three significant digits below 100 (2.56, 0.0273: a whole number
    read 2.56 full-graph passes per second as "3"), whole up to COMPACT_RATE (1,269,595), in
    millions above (15.2 M)."""
    return figure(x) if x < COMPACT_RATE else f"{x / 1e6:,.1f} M"


def per_hour(x: float) -> str:
    """A rate per hour for a card: whole above 100 (3,787), three significant digits below (0.0273)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def render(data: ViewData, present: bool = False) -> None:
    if data.json.get("inference") is not None:        # a serving scenario (issue 37)
        render_serving(data.json["inference"], present)
        return
    j = data.summary
    mem, cap = j.memory_GB, j.memory_capacity_GB
    busiest = j.bubble_fraction_busiest
    cols = st.columns(6, gap="small")
    # Help icons only where a card needs a second number: at six cards per row on a 1280-px
    # projector a label has ~150 px.
    if j.sync:
        # Replicas that train apart: the step's cost amortised over the window (explorer/variants/lowcomm).
        cols[0].metric("Time per step", fmt_time(j.time_per_step_s), border=True,
                       help=f"Amortised over {j.sync.inner_steps} inner steps and their sync",
                       delta=f"inner {fmt_time(j.iteration_time_s)}", delta_color="off",
                       delta_arrow="off")
    else:
        x = j.exchange
        # Asynchronous gossip past stragglers: the time of one global batch at the aggregate rate.
        unit = nouns(data.scenario.model).sample
        pace = (f"Equivalent global-batch time: with no barrier each replica steps at its own pace "
                f"(every {fmt_time(x.fastest_replica_step_s)} to {fmt_time(x.slowest_replica_step_s)}), "
                f"{x.samples_per_s:,.4g} {unit}/s together"
                if x is not None and x.asynchronous and x.slowest_replica_step_s > x.fastest_replica_step_s
                else None)
        band = (f"Expected error: {j.expected_error_label} (explorer/fidelity/band.py)"
                if j.expected_error_label else None)
        cols[0].metric("Iteration time", fmt_time(j.iteration_time_s), border=True,
                       help="  \n\n".join(x for x in (pace, band) if x) or None,
                       # The error band of similar published runs under the headline number: short,
                       # so a 1280-pixel card shows it whole; the help and the caption say what it is.
                       delta=(f"±{j.expected_error * 100:.0f} %" if j.expected_error is not None else None),
                       delta_color="off", delta_arrow="off")
    # What the workload's throughput counts: tokens for a transformer, images or clips for a ResNet.
    cols[1].metric(f"{nouns(data.scenario.model).per_second.capitalize()}/s", rate_text(j.tokens_per_s),
                   border=True, help=f"{j.tokens_per_s:,.0f}" if j.tokens_per_s >= COMPACT_RATE else None)
    # Against the bf16 peak (PaLM App. B, Llama 3): an FP8 run may pass 100 %, so its FP8-peak share
    # is said under it (a GB300 FP8 run read "MFU 100.4%" with nothing beside it).
    fp8 = j.mfu_fp8_peak
    # ("FP8 19.9%": "FP8 peak 19.9%" was cut to "FP8 peak ..." on a 1280-px card beside the sidebar.)
    cols[2].metric("MFU", f"{j.mfu:.1%}", border=True,
                   help="Model FLOPs (recompute not counted) / (time × GPUs × the bf16 dense peak)"
                        + ("" if fp8 is None else "; under it, FP8: the same against the FP8 dense peak"),
                   delta=None if fp8 is None else f"FP8 {fp8:.1%}", delta_color="off", delta_arrow="off")
    cols[3].metric("TFLOP/s per GPU", rate_text(j.tflops_per_gpu), border=True)
    if not _family_card(cols[4], data, j):
        cols[4].metric("Bubble", f"{j.bubble_fraction:.1%}", border=True,
                       help=("Pipeline idle share, averaged over the GPUs (each stage weighted by its GPUs)"
                             + (f"; busiest stage: {busiest:.1%}" if busiest is not None else "")),
                       # The second number fits under the value only on presentation's wider cards.
                       delta=(f"busiest stage {busiest:.1%}" if busiest is not None and present else None),
                       delta_color="off", delta_arrow="off")
    cols[5].metric("Memory per GPU", f"{mem:.1f} GB", border=True,
                   delta=(f"over {cap:.1f} GB" if mem > cap else f"of {cap:.1f} GB"),
                   delta_color="inverse" if mem > cap else "off", delta_arrow="off")
    if j.expected_error_label and not present:
        # How far to trust these numbers: the validation error of published runs of this regime
        # (explorer/fidelity/band.py), or why there are none.  On a projector the card's "±N %"
        # says it; the sentence would push the chart below a 720-pixel screen.
        st.caption(f"Expected error — {j.expected_error_label}")


def _family_card(col, data: ViewData, j: Summary) -> bool:
    """In place of the Bubble card, for a family that cannot pipeline (no bubble to show): its
    epoch (a GNN: epoch time and epochs per hour), else the exposed share of its own communication
    (a recommendation model's embedding all-to-all) with its bytes per GPU.  False: none."""
    w = workload_for(data.scenario.model)
    if w.pipeline_split:
        return False
    if j.epoch_s is not None:
        col.metric("Epoch", fmt_time(j.epoch_s), border=True,
                   help=f"One epoch: every training node once as a seed ({nouns(data.scenario.model).sample} "
                        f"of an epoch / their rate per second); {per_hour(3600 / j.epoch_s)} epochs per hour",
                   delta=f"{per_hour(3600 / j.epoch_s)} /h", delta_color="off", delta_arrow="off")
        return True
    own = [d for d in w.dimensions if d in j.breakdown_s and d != "dp"]
    if not own:
        return False
    d = own[0]
    mb = j.comm_bytes_per_gpu.get(d, 0.0) / 1e6
    # "Exposed emb" (the Gantt's lane name): on one line of a 1280-px projector's card.
    col.metric(f"Exposed {d}", f"{j.breakdown_s[d] / j.iteration_time_s:.1%}", border=True,
               help=f"{dimensions.get(d).label}: the share of the iteration compute waits for it (the "
                    f"rest runs under compute); {mb:,.1f} MB per GPU per iteration",
               delta=f"{mb:,.0f} MB/GPU", delta_color="off", delta_arrow="off")
    return True
