"""An iteration lasts at least as long as its busiest link needs to carry the iteration's bytes.

The engine times every call at its dimension's share of each boundary (topology.py: the groups of
*one* dimension divide a domain's egress).  Calls of *different* dimensions on their own streams
(pipeline sends, data-parallel buckets) share a link they overlap on (engine/sharing.py), but calls
made inside compute passes are not flows: CP's ring attention under the backward on the compute
stream and the DP buckets reducing beside it on the dp stream both run at the full NVLink rate
(docs/concepts.md, "Contention"), and where their bytes together need longer than the schedule's
iteration, the links would be more than 100 % busy.

No link moves more than its capacity times the time (the bandwidth term of Hockney's model,
"The communication challenge for MPP", Parallel Computing 20, 1994: B bytes over a link of rate C
take at least B / C), so the iteration is at least each link's bytes over its capacity: the
utilisation's own ``link_load`` (bytes / capacity, explorer/analysis/utilisation.py).  Where that is longer
than the schedule's period the link sets the pace, and the excess is charged to the dimensions
whose bytes load that link, in proportion to them.  This is a lower bound, not a model of the
sharing: when the overlapping calls fit in the iteration their slowdown is still not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..network.topology import BOUNDARY_NAMES
from .report import TIER_WORDS, Notice

SCALE_ACROSS = BOUNDARY_NAMES.index("scale-across")


@dataclass(frozen=True)
class LinkBound:
    """The iteration time after the bound, each class's breakdown (summing to it) and, when a link
    set it, the notice that says which link and why (None when the schedule's period stands)."""

    T: float
    breakdowns: tuple[dict[str, float], ...]
    notice: Notice | None = None


def link_bound(T: float, link_load: dict, breakdowns: tuple[dict[str, float], ...],
               traffic: tuple[dict[str, tuple[float, ...]], ...]) -> LinkBound:
    """``T`` raised to the busiest link's busy seconds when longer (module docstring).

    ``link_load``: busy seconds per iteration of each tier (by name) and WAN link direction (by
    ``("wan", from, to)``); ``traffic``: per class, per dimension, the bytes a GPU sends across each
    boundary (Measures.traffic), which split the excess among the dimensions."""
    if not link_load:
        return LinkBound(T, breakdowns)
    busy, key = max(((v, k) for k, v in link_load.items()), key=lambda x: x[0])
    if busy <= T:
        return LinkBound(T, breakdowns)
    i = BOUNDARY_NAMES.index(key) if isinstance(key, str) else SCALE_ACROSS
    load = {d: sum(tr[d][i] for tr in traffic if d in tr and i < len(tr[d])) for d in
            (traffic[0] if traffic else {})}
    total = sum(load.values())
    excess = busy - T
    if total <= 0:         # no dimension's bytes on record: the link, not a dimension, is charged
        share = {"bubble": 1.0}
    else:
        share = {d: v / total for d, v in load.items() if v > 0}
    out = tuple({k: v + excess * share.get(k, 0.0) for k, v in b.items()} for b in breakdowns)
    where = TIER_WORDS.get(key, key) if isinstance(key, str) else f"the WAN link {key[1]} -> {key[2]}"
    dims = ", ".join(sorted(share, key=lambda d: -share[d]))
    note = Notice("link", f"link: {where} must carry {busy:,.5g} s of traffic per iteration, longer than the "
                          f"schedule's {T:,.5g} s — calls of {dims} overlap on it, and calls inside "
                          f"compute passes share no link in the timeline; the iteration is set by the link")
    return LinkBound(busy, out, note)
