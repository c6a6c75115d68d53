"""The collective-algorithm registry: one frozen description per algorithm.

Everything outside ``explorer/collective_algorithms/`` asks this registry about an algorithm — the
operations it implements, whose model prices it (:class:`Family`), the libraries whose automatic
choice considers it, its cost function, why NCCL could not run it on a group, how its latency
crosses a WAN and how the step-through draws it — instead of comparing algorithm names.

Adding an algorithm = its cost function plus one entry in ``ALGORITHMS`` below (a test or a plug-in
may also add one at run time: every consumer reads the dictionary when it asks).  The cost is either

* ``nccl``: a :class:`NcclModel` — the link cost of NCCL's kernel (nccl_links.py), which the network
  layer refines with NCCL's tuning model (protocols, latency, channels, pipeline fill) on the row of
  NCCL's tuning tables the model names; or
* ``alpha_beta``: a complete alpha-beta model ``(op, S, shape, wiring) -> LinkCost`` (alpha_beta.py),
  as MPI and Gloo run it or for an algorithm of another family.

The config layer takes the values ``communication.algorithm`` and ``communication.library`` accept
from :data:`CHOICES` and :data:`LIBRARIES` (explorer/config/sections.py), so its error message's
list is always this registry's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import alpha_beta, nccl_links
from .base import (
    Family,
    LinkCost,
    OptionsLike,
    ShapeLike,
    Wiring,
    in_network_crossings,
    ring_crossings,
    tree_crossings,
)

LinkFn = Callable[[str, float, ShapeLike, OptionsLike], nccl_links.NcclLink]
AlphaBetaFn = Callable[[str, float, ShapeLike, Wiring], LinkCost]
CrossingsFn = Callable[[str, int], int]        # (op, datacenters) -> sequential WAN crossings

AUTO = "auto"                                  # the library chooses per call
LIBRARIES = ("nccl", "mpi", "gloo")            # communication.library
# What NCCL runs when the requested algorithm cannot run (its NCCL_ALGO documentation).
NCCL_FALLBACK = "ring"


@dataclass(frozen=True)
class NcclModel:
    """How NCCL runs an algorithm: its link cost, why it may not run, and the row of NCCL's tuning
    tables (NCCL's own algorithm enum, explorer/network/nccl_tuning.py) its protocols and latency use."""

    link: LinkFn
    unavailable: Callable[[OptionsLike], str] | None = None   # the fallback warning's reason
    row: str = ""                      # "" = the algorithm's name
    row_without_nvswitch: str = ""     # the row on nodes without an NVSwitch ("" = ``row``)
    # The link cost NCCL's tuning model assumes when it chooses among algorithms and protocols, where it
    # differs from what the algorithm really sends (None: ``link``); NCCL picks by its model, the call
    # then runs at what the links give.
    rated: LinkFn | None = None


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm (module docstring)."""

    name: str
    family: Family
    ops: tuple[str, ...]                           # operations it implements
    libraries: tuple[str, ...] = ()                # libraries whose "auto" considers it
    nccl: NcclModel | None = None                  # priced by NCCL's tuning model on this link cost
    alpha_beta: AlphaBetaFn | None = None          # priced by this alpha-beta model (MPI, Gloo, other)
    wan_crossings: CrossingsFn = in_network_crossings   # NCCL: WAN latencies one call pays in sequence
    ring_pipeline: bool = False                    # its chunk pipeline runs through n - 1 hops
    drawn_as: str = "ring"                         # the step-through's drawing (teaching/collective_steps)
    citation: str = ""

    @property
    def selectable(self) -> bool:
        """``communication.algorithm`` may name it (point-to-point exchanges have nothing to choose)."""
        return self.family is not Family.POINT_TO_POINT

    def implements(self, op: str) -> bool:
        return op in self.ops

    def tuning_row(self, up_kind: str) -> str:
        """The row of NCCL's tuning tables for a node whose scale-up wiring is ``up_kind``."""
        assert self.nccl is not None, f"{self.name} is not an NCCL algorithm"
        row = self.nccl.row or self.name
        return row if up_kind == "nvswitch" else (self.nccl.row_without_nvswitch or row)

    def why_unavailable(self, options: OptionsLike) -> str:
        """Why NCCL could not run it on a group (its ring ran instead)."""
        if self.nccl is not None and self.nccl.unavailable is not None:
            return self.nccl.unavailable(options)
        return f"{self.name} cannot run on these groups"


_ALL_OPS = ("all-reduce", "reduce-scatter", "all-gather")
_THAKUR = "Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005, Sec. 4"

# Registry order is NCCL's (and MPI's) tie-break order: the first of equal modelled times wins.
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ring", Family.NCCL, _ALL_OPS + ("broadcast", "send-recv"), LIBRARIES,
              nccl=NcclModel(nccl_links.ring), alpha_beta=alpha_beta.ring, wan_crossings=ring_crossings,
              ring_pipeline=True, drawn_as="ring",
              citation="Patarasuk & Yuan, JPDC 2009; " + _THAKUR),
    Algorithm("tree", Family.NCCL, ("all-reduce",), ("nccl",),
              nccl=NcclModel(nccl_links.tree, nccl_links.tree_unavailable, rated=nccl_links.tree_rated),
              wan_crossings=tree_crossings,
              drawn_as="tree", citation="Sanders, Speck & Traeff, Parallel Computing 2009"),
    Algorithm("nvls", Family.NCCL, _ALL_OPS, ("nccl",),
              nccl=NcclModel(nccl_links.nvls, nccl_links.nvls_unavailable), drawn_as="nvls",
              citation="NVLink SHARP (NCCL 2.17+)"),
    Algorithm("nvls-tree", Family.NCCL, ("all-reduce",), ("nccl",),
              nccl=NcclModel(nccl_links.nvls_tree, nccl_links.nvls_tree_unavailable,
                             rated=nccl_links.nvls_tree_rated),
              wan_crossings=tree_crossings, drawn_as="tree", citation="NCCL 2.18+ tuning.cc"),
    Algorithm("collnet", Family.NCCL, ("all-reduce",), ("nccl",),
              nccl=NcclModel(nccl_links.collnet, nccl_links.collnet_unavailable, row="collnet-direct",
                             row_without_nvswitch="collnet-chain"),
              drawn_as="tree", citation="InfiniBand SHARP through NCCL's CollNet"),
    Algorithm("pat", Family.NCCL, ("reduce-scatter", "all-gather"), ("nccl",),
              nccl=NcclModel(nccl_links.pat, nccl_links.pat_unavailable), wan_crossings=ring_crossings,
              drawn_as="ring", citation="NCCL 2.23 (Parallel Aggregated Trees)"),
    Algorithm("halving-doubling", Family.MPI, _ALL_OPS, ("mpi", "gloo"),
              alpha_beta=alpha_beta.halving_doubling, drawn_as="halving-doubling",
              citation="Rabenseifner; " + _THAKUR),
    Algorithm("hierarchical", Family.MPI, _ALL_OPS, ("mpi", "gloo"),
              alpha_beta=alpha_beta.hierarchical, drawn_as="hierarchical",
              citation="level-by-level reduction (alpha_beta.hierarchical)"),
    # Priced by the network's point-to-point model (NCCL's grouped sends: explorer/network/collectives.py).
    Algorithm("pairwise", Family.POINT_TO_POINT, ("all-to-all",), LIBRARIES, drawn_as="pairwise",
              citation="pairwise exchange, n - 1 concurrent sends"),
)}


def find(name: str) -> Algorithm | None:
    """The registered algorithm called ``name``, or None."""
    return ALGORITHMS.get(name)


def get(name: str) -> Algorithm:
    """The registered algorithm called ``name`` (ValueError listing the known ones otherwise)."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown collective algorithm {name!r}; known: {', '.join(ALGORITHMS)}") from None


def names() -> tuple[str, ...]:
    """Every registered algorithm's name, in registry order."""
    return tuple(ALGORITHMS)


def for_op(op: str) -> tuple[Algorithm, ...]:
    """The algorithms that implement ``op``, in registry order."""
    return tuple(a for a in ALGORITHMS.values() if op in a.ops)


def nccl_candidates(op: str) -> tuple[Algorithm, ...]:
    """What NCCL's automatic choice weighs for ``op`` (NCCL 2.25's tuning.cc: broadcast ring only;
    all-gather and reduce-scatter ring, NVLS and PAT; all-reduce everything but PAT)."""
    return tuple(a for a in ALGORITHMS.values() if a.nccl is not None and "nccl" in a.libraries
                 and op in a.ops)


def library_candidates(op: str, library: str) -> tuple[Algorithm, ...]:
    """What ``library``'s (MPI's, Gloo's) automatic choice weighs for ``op``: its alpha-beta algorithms."""
    return tuple(a for a in ALGORITHMS.values() if a.alpha_beta is not None and library in a.libraries
                 and op in a.ops)


class _Choices(Sequence[str]):
    """The values ``communication.algorithm`` accepts — ``auto`` and every selectable algorithm —
    read from :data:`ALGORITHMS` at each use."""

    def _now(self) -> tuple[str, ...]:
        return (AUTO,) + tuple(a.name for a in ALGORITHMS.values() if a.selectable)

    def __getitem__(self, i: Any) -> Any:
        return self._now()[i]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __contains__(self, value: object) -> bool:
        return value in self._now()

    def __repr__(self) -> str:
        return repr(self._now())


CHOICES: Sequence[str] = _Choices()
