"""The memory verdict: does a layout fit its GPUs, and with how much to spare.

One rule, read by every view that offers a layout (``run``, ``diff``, the Compare cards, the
design-space heatmap, ``sweep`` and ``search``): a layout **fits** when the busiest GPU's memory
is within its capacity (``Result.memory_over_capacity`` / the estimator's ``fits``, the same
comparison in bytes).  A layout offered as a *recommendation* (the search's ranking) must
also leave :data:`DEFAULT_HEADROOM_GB` free for what the model does not count.  The NCCL
communicators' buffers are counted in every GPU's total (``reserved``: 544 MB for a group of two,
688 MB for more per communicator, NVIDIA/nccl issue #964; explorer/taskgraph/techniques/
nccl_buffers.py), so the headroom holds the rest:

- the CUDA context and NCCL's initialisation, 484 MiB measured on one GPU (NVIDIA/nccl pull
  request #2366);
- the caching allocator's fragmentation, which can refuse an allocation with memory
  "technically" free (PyTorch devlog "When does fragmentation occur in the CUDA caching
  allocator?", 2026; Rajbhandari et al., ZeRO, SC20, Sec. 3.2 on fragmented memory).

1 GB is the first, rounded up, before fragmentation (it was 3 GB when it also held three
communicators, 3 x 688 MB: those are counted in the total now, not twice); a user who knows
their allocator better sets the headroom (``search --headroom-GB``, the app's search control).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..taskgraph.memory_split import HEADROOM_GB

# Module docstring: CUDA context + NCCL's initialisation; the memory-limited layer split leaves it.
DEFAULT_HEADROOM_GB = HEADROOM_GB
MAX_HEADROOM_GB = 1000.0       # a headroom beyond any GPU's memory is a typo


@dataclass(frozen=True)
class MemoryVerdict:
    """The memory of a layout's busiest GPU against that GPU's capacity (GB = 1e9 bytes), and
    whether it fits (the simulation's comparison in bytes, kept as it judged: a heterogeneous run
    judges each datacenter against its own GPU)."""

    need_GB: float
    capacity_GB: float
    fits: bool

    @classmethod
    def of(cls, need_GB: float, capacity_GB: float) -> MemoryVerdict:
        """The verdict of ``need_GB`` on a GPU of ``capacity_GB``."""
        return cls(need_GB, capacity_GB, need_GB <= capacity_GB)

    @classmethod
    def of_run(cls, run: Mapping[str, Any]) -> MemoryVerdict:
        """The verdict of a ``run --json`` object (its ``memory_over_capacity`` decides: rounding
        to GB must not flip a verdict at the edge)."""
        need, cap = float(run["memory_GB"]["total"]), float(run["memory_capacity_GB"])
        return cls(need, cap, not run.get("memory_over_capacity", need > cap))

    @property
    def free_GB(self) -> float:
        """Capacity left over (negative when it does not fit)."""
        return self.capacity_GB - self.need_GB

    def roomy(self, headroom_GB: float = DEFAULT_HEADROOM_GB) -> bool:
        """Whether it fits with ``headroom_GB`` to spare (what a recommendation needs)."""
        return self.fits and self.free_GB >= headroom_GB

    def label(self) -> str:
        """``does not fit: 117.7 of 85.9 GB`` or ``fits: 16.3 of 85.9 GB``."""
        return f"{'fits' if self.fits else 'does not fit'}: {self.need_GB:.1f} of {self.capacity_GB:.1f} GB"


def over_memory_sentences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """For two ``run --json`` objects compared (A, B), one sentence per side that does not fit
    (none when both fit): such a layout cannot run, so its figures are no gain to act on."""
    out = []
    for side, run in (("A", a), ("B", b)):
        v = MemoryVerdict.of_run(run)
        if not v.fits:
            then = ("its gains are no result to act on (raise tp or pp, use ZeRO or recompute activations)"
                    if side == "B" else "B is compared with a layout that cannot run")
            out.append(f"{side} does not fit: {v.need_GB:.1f} of {v.capacity_GB:.1f} GB per GPU — "
                       f"{side} cannot run as set; {then}.")
    return out
