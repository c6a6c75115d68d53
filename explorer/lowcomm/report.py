"""The window of a low-communication run in words (the CLI summary and the app's caption)."""
from __future__ import annotations

from .window import SyncWindow


def _s(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 10 else f"{t:.2f} s"


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def _gbps(x: float) -> str:
    return f"{x:,.0f} Gb/s" if x >= 100 else f"{x:.3g} Gb/s"


def sync_sentences(w: SyncWindow) -> list[str]:
    """What the window costs and what crosses the WAN, one sentence per line."""
    if w.kind == "independent":
        return [f"independent: {w.replicas} datacenters train separate models and never synchronise "
                f"(time per step = the inner step, {_s(w.inner_step_s)}; the final merge is not timed)",
                f"quality: {w.quality}"]
    streaming = w.kind == "streaming-diloco"
    every = f"every {w.inner_steps} steps" + (f", {w.fragments} fragments in turn" if streaming else "")
    out = [f"{w.kind}: {w.replicas} datacenters train apart and synchronise {every}; inner step "
           f"{_s(w.inner_step_s)}, whole-model synchronisation {_s(w.sync_s)} ({w.outer_dtype}), exposed "
           f"{_s(w.exposed_sync_s)} per window of {_s(w.window_s)} -> {_s(w.time_per_step_s)} per step",
           f"WAN: {_gb(w.wan_bytes_per_sync)} leave each datacenter per synchronisation "
           f"({_gb(w.wan_bytes_per_sync / w.inner_steps)} per step amortised), at "
           f"{_gbps(w.peak_wan_Gbps)} while it runs"]
    if w.wan_Gbps_needed is not None:
        hides = (f"it hides completely from {_gbps(w.wan_Gbps_to_hide)}" if w.wan_Gbps_to_hide is not None
                 else "it never hides completely (the in-datacenter gather alone outlasts the overlap)")
        out.append(f"hidden: a fragment's WAN bytes need {_gbps(w.wan_Gbps_needed)} per datacenter to "
                   f"move within {w.overlap_steps} inner step(s); {hides}")
    elif streaming:
        out.append("hidden: never (overlap_steps 0: each fragment's synchronisation blocks)")
    else:
        out.append("hidden: never (the synchronisation blocks every replica; streaming-diloco overlaps it)")
    out.append(f"quality: {w.quality}")
    return out
