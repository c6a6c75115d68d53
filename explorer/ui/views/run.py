"""The Run tab (issue 38): the whole run of a scenario with ``training.phases`` or
``training.total_tokens`` — its totals, the per-phase table, the run's timeline in days and the
goodput waterfall.  Shown only for scenarios with a run plan (:func:`labels`)."""
from __future__ import annotations

import json
from functools import lru_cache

import streamlit as st

from ...figures.fonts import PRESENT_FONT_PX
from ...figures.run import goodput_waterfall_figure, run_timeline_figure
from ...run.convergence import CITATION, DILOCO_CITATION
from ...run.phases import has_run
from ...run.report import percent, unfit_warnings
from ...run.total import RunTotal, run_total
from ...scenario import Scenario, ScenarioError, from_dict
from ...simulate import simulate
from ..export import chart
from ..plain import plain

KEY, LABEL = "run", "Run"


def labels(all_labels: dict[str, str], sc: Scenario) -> dict[str, str]:
    """The page's tabs: all of them, the Run tab only when ``sc`` has a run plan."""
    return {k: v for k, v in all_labels.items() if k != KEY or has_run(sc)}


@lru_cache(maxsize=16)
def _total(raw_json: str) -> RunTotal | None:
    """The run of a scenario (small: per phase a few numbers), once per scenario JSON; the phases'
    simulations run through the estimator as ``run`` does."""
    return run_total(from_dict(json.loads(raw_json)), simulate)


def run_summary(raw_json: str) -> dict | None:
    """run --json's ``run_total`` of a scenario (its JSON) as the Compare view reads it, or None
    without a run plan or when its run cannot be computed (the Run tab says why)."""
    try:
        total = _total(raw_json)
    except ScenarioError:
        return None
    return None if total is None else total.to_json_dict()


def render(raw_json: str, present: bool) -> None:
    try:
        total = _total(raw_json)
    except ScenarioError as exc:
        st.error(plain(str(exc)), icon="⚠️")
        return
    if total is None:
        st.info("This scenario is one iteration: give `training.total_tokens` or `training.phases` for "
                "a run.")
        return
    for said in unfit_warnings(total):      # a phase over memory: the plan cannot run as set
        st.error(plain(said), icon="⚠️")
    e = total.energy_MWh
    cards = st.columns(5 if total.price is not None else 4)
    cards[0].metric("Days", f"{total.days:,.1f}")
    cards[1].metric("GPU-hours", f"{total.gpu_hours / 1e6:,.2f}M" if total.gpu_hours >= 1e5
                    else f"{total.gpu_hours:,.0f}")
    cards[2].metric("Goodput", percent(total.goodput))
    cards[3].metric("Energy", "unknown" if e is None else f"{e:,.0f} MWh" if e >= 10 else f"{e:,.3f} MWh",
                    help=f"GPU power at the simulated compute share x GPUs x time x PUE {total.pue:g}")
    if total.price is not None:
        cards[4].metric("Cost", f"{total.price:,.0f}")
    font = PRESENT_FONT_PX if present else 12
    st.markdown("**The run** (phases as bands; expected failures and checkpoints marked)")
    chart(run_timeline_figure(total, height=240 if present else 260, font_size=font), key="run_timeline",
          present=present)
    table, waterfall = st.columns([3, 2], gap="medium")
    with table:
        st.markdown("**Phases**")
        st.dataframe([{"phase": p.name, "GPUs": p.gpus, "tokens (B)": round(p.tokens / 1e9, 3),
                       "steps": p.iterations, "step (s)": round(p.iteration_s, 3),
                       "tokens/s": round(p.tokens_per_s), "MFU": f"{p.mfu:.1%}",
                       "exposed comm": f"{p.exposed_comm_share:.1%}", "goodput": percent(p.goodput.goodput),
                       "days": round(p.days, 2),
                       "memory (GB)": f"{p.memory_GB:.1f}" + ("" if p.fits else " (over)")}
                      for p in total.phases], hide_index=True,
                     use_container_width=True)
    with waterfall:
        st.markdown("**Where the wall-clock days go**")
        chart(goodput_waterfall_figure(total, height=280 if present else 300, font_size=font),
              key="run_waterfall", present=present)
    loss = total.loss
    if loss is not None:
        cited = CITATION + (f"; {DILOCO_CITATION}" if loss.diloco else "")
        st.caption(f"Loss, an estimate from the literature ({cited}, critical batch "
                   f"{loss.critical_batch_tokens / 1e6:,.4g}M tokens): the run's progress equals "
                   f"{loss.equivalent_tokens / 1e9:,.4g}B tokens at the small-batch limit — data efficiency "
                   f"{loss.data_efficiency:.1%}. Compare two plans (Compare view, or `diff`) to see when "
                   "each reaches the other's loss.")
    if not present:
        with st.expander("How to read this"):
            st.markdown(
                "Each phase is the scenario with its overrides, simulated once (phases with the same "
                "effective scenario share one simulation); its steps are its tokens over global batch x "
                "sequence length. Failures stop the whole job: its MTBF is `reliability.mtbf_gpu_hours` over "
                "the GPUs. Checkpoints come every Young/Daly interval sqrt(2 x write cost x MTBF) unless "
                "`reliability.checkpoint_interval_s` says otherwise (Young 1974; Daly 2006); a failure loses "
                "half an interval of work on average, and a restart reads the checkpoint back. "
                "Goodput = 1 - write cost / interval - (interval / 2 + restart) / MTBF with a spare at "
                "hand; with `reliability.repair_h` that times the share of time the job can train while "
                "nodes are under repair (exp(-repair / MTBF) waiting; elastic: the survivors' share).")
