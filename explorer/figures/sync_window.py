"""The multi-step view of ``training.sync``: one window of H inner steps and its synchronisation.

Three lanes over the window's real time: the inner steps (repeated steps drawn as one bar "xk
steps", so 500 steps read as a few bars), the WAN (each synchronisation: the whole model, or one
fragment of Streaming DiLoCo), and the stalls (a synchronisation that is not done when its result
is needed holds every replica).  :func:`window_segments` computes the bars (tested), and
:func:`sync_window_figure` draws them.  No Streamlit here.

Streaming DiLoCo (Douillard et al. 2025, Sec. 2.2): fragment f is sent after inner step
(f+1) x H/F and its result is applied tau steps later; if the WAN has not finished by then, the
replicas wait.  Blocking kinds send the whole model after step H and wait for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from ..design.consensus import KNEE_SHARE, ConsensusCurve
from ..variants.lowcomm import SyncWindow

LANES = ("inner steps", "WAN", "stall")
COLOURS = {"compute": "#4C78A8", "sync": "#E45756", "stall": "#B279A2", "update": "#9D9D9D"}


@dataclass(frozen=True)
class Segment:
    """One bar: its lane, start and end in seconds from the window's start, what it is, its label."""

    lane: str
    start: float
    end: float
    kind: str         # compute | sync | stall | update
    label: str


def _steps(first: int, count: int, t0: float, step: float) -> Segment:
    word = f"step {first + 1}" if count == 1 else f"steps {first + 1}-{first + count} (x{count})"
    return Segment("inner steps", t0, t0 + count * step, "compute", word)


def window_segments(w: SyncWindow) -> list[Segment]:
    """The bars of one window (module docstring); they end at ``w.window_s`` exactly."""
    H, T = w.inner_steps, w.inner_step_s
    if w.kind == "independent":
        return [_steps(0, H, 0.0, T)]
    if w.kind != "streaming-diloco":
        t = H * T
        out: list[Segment] = [_steps(0, H, 0.0, T),
               Segment(w.link, t, t + w.sync_s, "sync", f"all-reduce of the model ({w.outer_dtype})"),
               Segment("stall", t, t + w.sync_s, "stall", "every replica waits for the synchronisation")]
        if w.update_s > 0:
            end = t + w.sync_s
            out.append(Segment("inner steps", end, end + w.update_s, "update", "outer update"))
        return out
    F, tau = w.fragments, w.overlap_steps
    gap = H // F
    sends = {(f + 1) * gap - 1 if f < F - 1 else H - 1: f for f in range(F)}   # sent after that step
    out = []
    t, last = 0.0, -1
    pending: list[tuple[int, float, int]] = []      # (step that needs it, WAN end, fragment)
    for step in range(H):
        for _due, end, f in [p for p in pending if p[0] == step]:
            if end > t:
                if step > last + 1:                 # the steps run before the stall
                    out.append(_steps(last + 1, step - last - 1, t - (step - last - 1) * T, T))
                    last = step - 1
                out.append(Segment("stall", t, end, "stall", f"every replica waits for fragment {f + 1}"))
                t = end
        pending = [p for p in pending if p[0] != step]
        t += T
        if step in sends:
            out.append(_steps(last + 1, step - last, t - (step - last) * T, T))
            last = step
            f = sends[step]
            end = t + w.fragment_sync_s
            out.append(Segment(w.link, t, end, "sync", f"fragment {f + 1} of {F} ({w.outer_dtype})"))
            pending.append((step + 1 + tau, end, f))
    # The last fragment is due tau steps into the next window: the wait it causes there is drawn
    # here, at the window's end, so that the window's length is the steady-state period.
    for due, end, f in pending:
        wait = end - (t + (due - H) * T)
        if wait > 0:
            out.append(Segment("stall", t, t + wait, "stall",
                               f"fragment {f + 1}: waited for {due - H} step(s) into the next window"))
            t += wait
    if w.update_s > 0:
        out.append(Segment("inner steps", t, t + w.update_s, "update", "outer updates"))
    return out


# A run of more steps than this is folded: its first and last step drawn, the rest as one block
# of one step's width labelled with its count (as the Gantt folds a periodic steady state).
FOLD_OVER = 6


@dataclass(frozen=True)
class Fold:
    """The real-time -> drawn-time map of a window whose long runs of steps are folded."""

    cuts: tuple[tuple[float, float, float], ...]    # (real start, real end, drawn width) of each fold

    def __call__(self, t: float) -> float:
        shift = 0.0
        for a, b, width in self.cuts:
            if t <= a:
                break
            if t < b:                                 # inside a fold: linear over its drawn width
                return t - shift - (t - a) * (1 - width / (b - a))
            shift += (b - a) - width
        return t - shift


def fold_map(segments: list[Segment], step_s: float) -> Fold:
    """The map that draws each run of more than FOLD_OVER steps as first step + one block + last."""
    cuts = []
    for seg in segments:
        k = round((seg.end - seg.start) / step_s) if seg.kind == "compute" and step_s > 0 else 0
        if k > FOLD_OVER:
            cuts.append((seg.start + step_s, seg.end - step_s, step_s))
    return Fold(tuple(sorted(cuts)))


def sync_window_figure(w: SyncWindow, height: int = 240, font_size: int = 12, fold: bool = True) -> go.Figure:
    """The window as a three-lane bar chart (module docstring); with ``fold``, long runs of inner
    steps are drawn folded ("xk" in their label) and the axis is labelled in real seconds."""
    segs = window_segments(w)
    fmap = fold_map(segs, w.inner_step_s) if fold else Fold(())
    fig = go.Figure()
    for kind in ("compute", "sync", "stall", "update"):
        mine = [s for s in segs if s.kind == kind]
        if not mine:
            continue
        x0 = [fmap(s.start) for s in mine]
        x1 = [fmap(s.end) for s in mine]
        fig.add_trace(go.Bar(
            y=[s.lane for s in mine], x=[b - a for a, b in zip(x0, x1, strict=True)], base=x0,
            orientation="h", marker=dict(color=COLOURS[kind], line=dict(color="white", width=1)),
            name=kind, text=[s.label for s in mine], textposition="inside", insidetextanchor="middle",
            customdata=[[s.start, s.end - s.start] for s in mine],
            hovertemplate=("%{text}<br>from %{customdata[0]:.4g} s, %{customdata[1]:.4g} s long"
                           "<extra></extra>")))
    for a, b, width in fmap.cuts:                     # shade each fold and say what it hides
        left = fmap(a)
        fig.add_vrect(x0=left, x1=left + width, fillcolor="#888", opacity=0.18, line_width=0)
        k = round((b - a) / w.inner_step_s)
        fig.add_annotation(x=left + width / 2, y=1.0, yref="paper", showarrow=False, yanchor="bottom",
                           text=f"x{k:,}", font=dict(size=font_size - 1),
                           hovertext=f"{k:,} steps, {b - a:,.4g} s, drawn as one")
    edges: list[float] = []
    drawn: list[float] = []
    span = fmap(max(s.end for s in segs)) or 1.0
    for t in sorted({round(t, 9) for s in segs for t in (s.start, s.end)}):
        if not drawn or fmap(t) - drawn[-1] >= 0.06 * span:     # ticks closer than that would overlap
            edges.append(t)
            drawn.append(fmap(t))
    title = "seconds into the window" + (" (long runs of steps folded)" if fmap.cuts else "")
    labels = [f"{(t if t > 0 else 0.0):.4g}" for t in edges]          # never "-0"
    fig.update_xaxes(tickvals=[fmap(t) for t in edges], ticktext=labels,
                     title_text=title, rangemode="tozero")
    fig.update_layout(barmode="overlay", height=height, font=dict(size=font_size),
                      margin=dict(l=6, r=6, t=46, b=30), showlegend=False,
                      title=dict(text=f"One window: {w.inner_steps} inner steps and their synchronisation "
                                      f"· {w.time_per_step_s:.4g} s per step", font=dict(size=font_size + 1)))
    lanes = [w.link if lane == "WAN" else lane for lane in LANES]     # "fabric" for node groups
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)))
    return fig


def consensus_figure(curve: ConsensusCurve, height: int = 300, font_size: int = 12) -> go.Figure:
    """Time per step against the synchronisation period, one line per replica count, each knee
    (explorer/design/consensus.py) marked with a diamond."""
    fig = go.Figure()
    for D, knee in curve.knees.items():
        pts = [p for p in curve.points if p.replicas == D]
        fig.add_trace(go.Scatter(
            x=[p.inner_steps for p in pts], y=[p.time_per_step_s for p in pts], mode="lines+markers",
            name=f"{D} replicas", customdata=[[p.sync_share] for p in pts],
            hovertemplate=f"{D} replicas, H = %{{x}}: %{{y:.4g}} s per step, sync %{{customdata[0]:.0%}}"
                          "<extra></extra>"))
        if knee is not None:
            k = next(p for p in pts if p.inner_steps == knee)
            fig.add_trace(go.Scatter(x=[knee], y=[k.time_per_step_s], mode="markers", showlegend=False,
                                     marker=dict(symbol="diamond", size=12, color="black"),
                                     hovertemplate=f"knee of {D} replicas: H = {knee}<extra></extra>"))
    fig.update_xaxes(type="log", title_text="synchronisation period H (inner steps)")
    fig.update_yaxes(title_text="time per step (s)", rangemode="tozero")
    fig.update_layout(height=height, font=dict(size=font_size), margin=dict(l=6, r=6, t=30, b=30),
                      title=dict(text=f"{curve.kind}: how many replicas, how often to synchronise "
                                      f"(◆ knee: sync ≤ {KNEE_SHARE:.0%} of a step)",
                                 font=dict(size=font_size + 1)))
    return fig
