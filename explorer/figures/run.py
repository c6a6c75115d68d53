"""The whole run's figures (issue 38): its timeline in days (phases as bands, expected failures and
checkpoints marked) and the goodput waterfall (compute -> checkpoint stalls -> lost work -> restarts).

Both read a :class:`~explorer.run.total.RunTotal`.  The marks are *expected* events: a phase of
``wall`` seconds at job MTBF ``M`` expects ``wall / M`` failures, drawn evenly spaced (the model is
a rate, not a schedule); checkpoints every ``interval`` seconds likewise.  A phase with more than
:data:`MAX_MARKS` of a kind (ticks would merge into a line) gets a shaded band on that row instead,
whose hover gives the count and the spacing.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from ..run.report import percent
from ..run.total import DAY_S, RunTotal

MAX_MARKS = 400               # marks drawn per phase and kind at most; more: a shaded band
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6", "#E45756")
FAILURE = "#C00"
CHECKPOINT = "#555"
ZOOM_BELOW = 0.10             # overheads under this share of the run: the waterfall's axis starts above 0


def _marks(start_d: float, wall_s: float, every_s: float) -> list[float]:
    """Days of evenly spaced expected events every ``every_s`` in a phase (none if inf or too many)."""
    if not math.isfinite(every_s) or every_s <= 0:
        return []
    n = int(wall_s / every_s)
    if n == 0 or n > MAX_MARKS:
        return []
    return [start_d + (k + 1) * every_s / DAY_S for k in range(n)]


def _dense(fig: go.Figure, row: str, start_d: float, p_days: float, count: float, every_s: float,
           color: str, what: str, legend: bool) -> None:
    """A band over a phase on ``row`` standing for ``count`` events too dense to draw one by one."""
    fig.add_trace(go.Bar(x=[p_days], y=[row], base=[start_d], orientation="h", name=f"{what} (dense)",
                         marker=dict(color=color, opacity=0.35), showlegend=legend, legendgroup=what,
                         hovertemplate=f"{count:,.0f} expected {what}s, one every {every_s:,.0f} s"
                                       "<extra></extra>"))


def run_timeline_figure(total: RunTotal, height: int = 260, font_size: int = 12) -> go.Figure:
    """Phases as bands along the run's days; expected failures (red) above and checkpoints (grey)
    below the bands; hover says each phase's days, tokens, step, GPUs and expected events."""
    fig = go.Figure()
    t = 0.0
    fail_x: list[float] = []
    ckpt_x: list[float] = []
    dense = {"failure": False, "checkpoint": False}
    for i, p in enumerate(total.phases):
        g = p.goodput
        failures = p.wall_s / g.job_mtbf_s if math.isfinite(g.job_mtbf_s) else 0.0
        checkpoints = p.compute_s / g.interval_s if math.isfinite(g.interval_s) else 0.0
        fig.add_trace(go.Bar(
            x=[p.days], y=["run"], base=[t], orientation="h", name=p.name,
            marker=dict(color=PALETTE[i % len(PALETTE)], line=dict(width=1, color="white")),
            hovertemplate=(f"<b>{p.name}</b><br>{p.days:,.2f} days from day {t:,.1f}<br>"
                           f"{p.tokens / 1e9:,.1f}B tokens, {p.iterations:,} steps of "
                           f"{p.iteration_s:.2f} s<br>{p.gpus:,} GPUs, MFU {p.mfu:.1%}, goodput "
                           f"{percent(g.goodput)}<br>expected failures {failures:,.0f}, checkpoints "
                           f"{checkpoints:,.0f}<extra></extra>")))
        for row, count, every, wall, color, what, xs in (
                ("failures", failures, g.job_mtbf_s, p.wall_s, FAILURE, "failure", fail_x),
                ("checkpoints", checkpoints, g.interval_s, p.compute_s, CHECKPOINT, "checkpoint", ckpt_x)):
            if count > MAX_MARKS:
                _dense(fig, row, t, p.days, count, every, color, what, not dense[what])
                dense[what] = True
            else:
                xs += _marks(t, wall, every)
        t += p.days
    if fail_x:
        fig.add_trace(go.Scatter(x=fail_x, y=["failures"] * len(fail_x), mode="markers",
                                 name="expected failure",
                                 marker=dict(symbol="line-ns-open", color=FAILURE, size=10),
                                 hovertemplate="expected failure, day %{x:.1f}<extra></extra>"))
    if ckpt_x:
        fig.add_trace(go.Scatter(x=ckpt_x, y=["checkpoints"] * len(ckpt_x), mode="markers", name="checkpoint",
                                 marker=dict(symbol="line-ns-open", color=CHECKPOINT, size=10),
                                 hovertemplate="checkpoint, day %{x:.2f}<extra></extra>"))
    rows = ["checkpoints"] * bool(ckpt_x or dense["checkpoint"]) + ["run"]
    rows += ["failures"] * bool(fail_x or dense["failure"])
    fig.update_layout(barmode="overlay", height=height, margin=dict(l=10, r=10, t=30, b=40),
                      font=dict(size=font_size), xaxis=dict(title="days", range=[0, max(t, 1e-9) * 1.01]),
                      yaxis=dict(categoryorder="array", categoryarray=rows),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig


def waterfall_steps(total: RunTotal) -> list[tuple[str, float]]:
    """(step, days) of the goodput waterfall: failure-free compute, then what checkpoints, the work
    failures lose, restarts and (with ``reliability.repair_h``) the failed nodes under repair add;
    their sum is the run's days.  The repair step is left out when no phase waits for a node."""
    compute = ckpt = lost = restart = repair = 0.0
    for p in total.phases:
        g, wall = p.goodput, p.wall_s / DAY_S
        compute += p.compute_s / DAY_S
        ckpt += g.checkpoint_share * wall
        lost += g.lost_work_share * wall
        restart += g.restart_share * wall
        repair += g.repair_share * wall
    steps = [("compute", compute), ("checkpoint stalls", ckpt), ("work lost to failures", lost),
             ("restarts", restart)]
    return steps + [("nodes under repair", repair)] * (repair > 0)


def goodput_waterfall_figure(total: RunTotal, height: int = 300, font_size: int = 12) -> go.Figure:
    """Compute -> + checkpoint stalls -> + lost work -> + restarts (-> + repairs) = the run's days.  When
    the overheads are small beside the compute (under ZOOM_BELOW of the run) the axis starts above 0,
    so that they stay visible; its title says where it starts."""
    steps = waterfall_steps(total)
    days = sum(d for _, d in steps)
    compute = steps[0][1]
    fig = go.Figure(go.Waterfall(
        x=[s for s, _ in steps] + ["wall clock"], y=[d for _, d in steps] + [days],
        measure=["absolute"] + ["relative"] * (len(steps) - 1) + ["total"],
        text=[f"{d:,.2f} d" for _, d in steps] + [f"{days:,.2f} d"],
        textposition="outside", connector=dict(line=dict(color="#999")),
        increasing=dict(marker=dict(color=FAILURE)), totals=dict(marker=dict(color="#4C78A8")),
        decreasing=dict(marker=dict(color="#54A24B")),
        hovertemplate="%{x}: %{y:,.3f} days<extra></extra>"))
    low, title = 0.0, "days"
    overhead = days - compute
    if days > 0 and overhead < ZOOM_BELOW * days:
        low = max(compute - 4 * max(overhead, 1e-3 * days), 0.0)
        title = f"days (axis from {low:,.1f})"
    # Room above the tallest bar for its label, also at the projector's larger font.
    top = days + max(days - low, 1e-9) * 0.22
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), font=dict(size=font_size),
                      yaxis=dict(title=title, range=[low, top if days > 0 else 1]), showlegend=False,
                      title=dict(text=f"goodput {percent(total.goodput)}", x=0.02, y=0.98))
    return fig
