"""*Step through this call*: the collective bar the user clicked, drawn step by step
(explorer/teaching/collective_steps.py) — which rank sends which chunk to whom, the running bytes
on every link and each step's alpha-beta time with this scenario's links."""
from __future__ import annotations

import streamlit as st

from ...analysis.gantt_bar import GanttBar
from ...collective_algorithms import registry
from ...figures.collective_steps import step_figure
from ...figures.fonts import PRESENT_FONT_PX
from ...network.topology import Fabric
from ...teaching.collective_steps import (
    ALGORITHMS,
    MAX_RANKS,
    OPS,
    SWITCH,
    Links,
    step_seconds,
    walkthrough,
)
from ...teaching.explain import _op
from ..cache import ViewData
from ..export import chart
from ..plain import plain

DRAWN_RANKS = 8          # a group larger than MAX_RANKS is drawn with this many ranks


def links_of(data: ViewData) -> Links:
    """Alpha and per-GPU bandwidth inside a node (one GPU's scale-up link at its line rate) and
    across nodes (the node's NICs shared by its GPUs, at the fabric's achievable fraction) for the
    step times: the topology's own rates (network/topology.Fabric), not recomputed from the fields."""
    up, out = Fabric.for_cluster(data.scenario.cluster).boundaries[:2]
    return Links(up.latency_s, up.line_Bps, out.latency_s, out.per_gpu_Bps)


def _drawable(algorithm: str, op: str, group: int, per_node: int) -> tuple[str, str, int, int]:
    """(algorithm, op, ranks, ranks per node) of the drawing closest to the call."""
    # The registry names the drawing of each algorithm (PAT is drawn as the ring, NVLS-tree and
    # CollNet as the tree); a call without an algorithm ("none") as the ring.
    known = registry.find(algorithm)
    alg = known.drawn_as if known is not None else "ring"
    if op not in OPS[alg]:
        alg = "pairwise" if op == "all-to-all" else "ring"
        op = op if op in OPS[alg] else "all-reduce"
    n = group if 2 <= group <= MAX_RANKS else DRAWN_RANKS
    if alg == "halving-doubling":
        n = 1 << (n.bit_length() - 1)
    g = min(per_node, n)
    if alg == "hierarchical" and (n % g or g < 2):
        alg = "ring"
    return alg, op, n, g


def render_call(data: ViewData, bar: GanttBar, present: bool = False) -> None:
    """The expander for the clicked collective ``bar`` (the Gantt's hover record); nothing for a
    compute bar or a point-to-point transfer."""
    if not bar.bytes or bar.group < 2:
        return
    op = _op(bar.detail)
    if op == "send-recv":
        return
    nbytes, group, algorithm = bar.bytes, bar.group, bar.algorithm or "ring"
    with st.expander("Step through this call", expanded=False):
        alg, op, n, g = _drawable(algorithm, op, group, data.scenario.cluster.gpus_per_node)
        cols = st.columns(3)
        alg = cols[0].selectbox("Algorithm", ALGORITHMS, index=ALGORITHMS.index(alg), key="coll_alg")
        op = op if op in OPS[alg] else OPS[alg][0]
        n = cols[1].number_input("Ranks", 2, MAX_RANKS, n, key="coll_n")
        g = cols[2].number_input("Ranks per node", 1, MAX_RANKS, min(g, n), key="coll_g")
        try:
            w = walkthrough(alg, op, int(n), nbytes, int(g))
        except ValueError as exc:
            st.info(f"Not drawable: {plain(str(exc))}.")
            return
        if n != group:
            st.caption(f"The call spans {group} GPUs; drawn with {n} ranks (same algorithm and bytes).")
        k = st.slider("Step", 1, len(w.steps), len(w.steps), key="coll_step") - 1
        times = step_seconds(w, links_of(data))
        chart(step_figure(w, k, height=380 if present else 420, font_size=PRESENT_FONT_PX if present else 12),
              key="coll_fig", present=present, config={"displaylogo": False})
        st.markdown(_step_text(w, k, times))
        st.table(_link_table(w, k))


def _step_text(w, k: int, times: list[tuple[float, float, float, bool]]) -> str:
    """What step ``k`` does and its alpha-beta time with the scenario's numbers."""
    st_ = w.steps[k]
    a, b, sec, cross = times[k]
    where = "across nodes" if cross else "inside the node"
    total = sum(t[2] for t in times)
    first = st_.transfers[0]
    return (f"**{w.algorithm} {w.op}, step {k + 1} of {len(w.steps)} — {st_.phase}.** "
            f"{len(st_.transfers)} transfers at once, e.g. "
            f"{'switch' if first.src == SWITCH else f'rank {first.src}'} → "
            f"{'switch' if first.dst == SWITCH else f'rank {first.dst}'}: {first.chunk}, "
            f"{first.nbytes / 1e6:,.3f} MB.  \n"
            f"t = α + bytes / β = {a * 1e6:.1f} µs + {b / 1e6:,.3f} MB / {_rate(b, sec - a)} ({where}) = "
            f"**{sec * 1e3:.3f} ms**; all {len(w.steps)} steps: {total * 1e3:.3f} ms (the textbook "
            "estimate; the Gantt's bar is NCCL's tuning model of the same call).")


def _rate(nbytes: float, seconds: float) -> str:
    """β of a step, from its bytes and data time, as GB/s."""
    return f"{nbytes / seconds / 1e9:,.1f} GB/s" if seconds > 0 else "β"


def _link_table(w, k: int) -> dict[str, list]:
    """Running bytes per directed link after step ``k`` (the busiest first, at most 16 rows)."""
    carried = sorted(w.link_bytes(k + 1).items(), key=lambda kv: (-kv[1], kv[0]))[:16]
    name = {SWITCH: "switch"}
    return {"link": [f"{name.get(a, a)} → {name.get(b, b)}" for (a, b), _ in carried],
            "MB so far": [f"{v / 1e6:,.3f}" for _, v in carried]}
