"""The window of a low-communication run in words (the CLI summary and the app's caption)."""
from __future__ import annotations

from .decentral import Exchange
from .loss_law import DilocoLoss
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
        return [f"independent: {w.replicas} {w.groups} train separate models and never synchronise "
                f"(time per step = the inner step, {_s(w.inner_step_s)}; the final merge is not timed)",
                f"quality: {w.quality}"]
    streaming = w.kind == "streaming-diloco"
    every = f"every {w.inner_steps} steps" + (f", {w.fragments} fragments in turn" if streaming else "")
    out = [f"{w.kind}: {w.replicas} {w.groups} train apart and synchronise {every}; inner step "
           f"{_s(w.inner_step_s)}, whole-model synchronisation {_s(w.sync_s)} ({w.outer_dtype}), exposed "
           f"{_s(w.exposed_sync_s)} per window of {_s(w.window_s)} -> {_s(w.time_per_step_s)} per step"]
    if w.group_nodes == 0 or w.wan_bytes_per_sync > 0:
        out.append(f"WAN: {_gb(w.wan_bytes_per_sync)} leave each datacenter per synchronisation "
                   f"({_gb(w.wan_bytes_per_sync / w.inner_steps)} per step amortised), at "
                   f"{_gbps(w.peak_wan_Gbps)} while it runs")
    else:
        nic = w.sync_bytes_per_gpu.get("scale-out", 0.0)
        out.append(f"fabric: each GPU sends {_gb(nic)} through its node's NICs per synchronisation "
                   f"({_gb(nic / w.inner_steps)} per step amortised); nothing crosses a WAN")
    if w.wan_Gbps_needed is not None:
        hides = (f"it hides completely from {_gbps(w.wan_Gbps_to_hide)}" if w.wan_Gbps_to_hide is not None
                 else "it never hides completely (the in-datacenter gather alone outlasts the overlap)")
        out.append(f"hidden: a fragment's WAN bytes need {_gbps(w.wan_Gbps_needed)} per datacenter to "
                   f"move within {w.overlap_steps} inner step(s); {hides}")
    elif streaming:
        out.append("hidden: never (overlap_steps 0: each fragment's synchronisation blocks)")
    else:
        out.append("hidden: never (the synchronisation blocks every replica; streaming-diloco overlaps it)")
    out += trade_sentences(w)
    out.append(f"quality: {w.quality}")
    return out


def trade_sentences(w: SyncWindow) -> list[str]:
    """What the window buys per step and, where a scaling law is published, what it costs in loss:
    the two side by side (simulated; estimated from the literature)."""
    out = []
    if w.every_step_s is not None and w.speedup is not None:
        out.append(f"per step: {_s(w.time_per_step_s)} against {_s(w.every_step_s)} synchronising every step "
                   f"over the same links: {w.speedup:.3g}x {'faster' if w.speedup >= 1 else 'as fast'} "
                   "per step (simulated)")
    if w.loss is not None:
        out.append(f"loss: {DilocoLoss.from_json(w.loss).sentence()}")
    return out


def exchange_sentences(x: Exchange) -> list[str]:
    """What gossip or the parameter servers cost per step, one sentence per line."""
    sent = x.sent
    if x.kind == "parameter-server":
        out = [f"parameter-server: {x.replicas} replicas push gradients to and pull weights from {x.peers} "
               f"server node(s): {_s(x.exchange_s)} per step after the replica's {_s(x.step_s)}",
               f"servers: {_gb(x.server_nic_bytes)} through each server NIC per step each way, busy "
               f"{x.server_nic_utilisation:.0%} of the step; each GPU pushes {_gb(sent)} ({x.payload_dtype})"]
    elif x.asynchronous:
        out = [f"{x.kind} (AD-PSGD): each of {x.replicas} replicas averages its model with one random ring "
               f"neighbour per step, with no barrier: {_gb(sent)} sent per GPU ({x.payload_dtype}), "
               f"{_s(x.exchange_s)}, concurrent with the replica's {_s(x.step_s)} step; {_s(x.exposed_s)} "
               "exposed"]
    else:
        out = [f"{x.kind}: each of {x.replicas} replicas averages its model with {x.peers} neighbour(s) per "
               f"step: {_gb(sent)} sent per GPU ({x.payload_dtype}), {_s(x.exchange_s)}, overlapped with the "
               f"replica's {_s(x.step_s)} step; {_s(x.exposed_s)} exposed"]
    out += straggler_sentences(x)
    note = x.quality.removesuffix(" — not simulated here")
    return out + [f"quality: {note} — not simulated here"]


def straggler_sentences(x: Exchange) -> list[str]:
    """What replicas of different speeds (cluster.stragglers) cost under ``x``: nothing to say when
    they are alike.  Relative throughputs against every replica at the fastest one's cycle: the
    synchronous kinds run at the slowest cycle (fastest / slowest), gossip-async at the aggregate
    rate (samples_per_s x fastest / global_batch; explorer/variants/lowcomm/decentral.py)."""
    fast, slow = x.fastest_replica_step_s, x.slowest_replica_step_s
    if not x.global_batch or slow <= fast:
        return []
    sync_share = fast / slow
    if x.asynchronous:
        share = x.samples_per_s * fast / x.global_batch
        return [f"stragglers: every replica steps at its own pace, the fastest every {_s(fast)}, the "
                f"slowest every {_s(slow)}; together {x.samples_per_s:,.4g} sequences/s, {share:.1%} of the "
                f"rate with none, where synchronous gossip would hold every replica to the slowest "
                f"({sync_share:.1%})"]
    return [f"stragglers: every replica waits for the slowest, stepping every {_s(slow)} instead of "
            f"{_s(fast)}: {x.samples_per_s:,.4g} sequences/s, {sync_share:.1%} of the rate with none"
            + ("" if x.kind == "parameter-server" else " (gossip-async lets each run at its own pace)")]
