"""The record a workload family registers (explorer/workloads/registry.py): how a scenario selects
it, the function giving its :class:`~explorer.workloads.spec.WorkloadSpec`, what it supports and
what the pages call its parts.  Everything outside explorer/workloads/ asks this record instead of
testing the model type."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..config import Model, Scenario
from .spec import WorkloadSpec

# The parallel degrees a scenario sets, each the dimension it creates (dp is the replicas' count).
DEGREES = ("tp", "cp", "ep", "pp")


@dataclass(frozen=True)
class Nouns:
    """What the pages call a family's units: ``per_second`` what its throughput counts (tokens,
    images), ``sample`` one element of the global batch (sequences, images, clips), ``layers`` what
    its pipeline layers are, said after the stage split ("" when they are simply layers), and its
    work before the first layer and after the last (a transformer's embedding and logits)."""

    per_second: str
    sample: str
    layers: str = ""
    first_edge: str = "embedding"
    last_edge: str = "logits"


@dataclass(frozen=True)
class HostInput:
    """What the host does for each pipeline unit before the GPU can run it (a GNN's CPU sampler and
    host-to-GPU copy): ``per_unit_s`` seconds of it; ``pipelined``: it prepares the next units while
    the GPU runs this one, so an iteration lasts at least ``m x per_unit_s`` (steady state: the
    host keeps one unit's pace through the GPU's whole step, its communication included,
    analysis/steady_state.py); else the GPU waits ``per_unit_s`` before every unit (the builder's
    first edge).  ``what`` names it with its figures, ``remedy`` what would hide it, ``unit`` what
    the family calls a unit (the bottleneck sentence, analysis/report.bottleneck)."""

    per_unit_s: float
    pipelined: bool
    what: str
    remedy: str
    unit: str = "unit"


@dataclass(frozen=True)
class Attention:
    """A family's attention as a serving pass prices it (explorer/serving: prefill and decode read
    the layer's weight GEMMs, its per-head dimensions and its parameter count):
    ``block(model, tokens, seq, tp)`` the weight GEMMs, core FLOPs and K/V size of one layer,
    ``params(model)`` its weights on all TP ranks, ``head_dims(model)`` (d_qk, d_v)."""

    block: Callable[[Model, float, float, int], Any]
    params: Callable[[Model], float]
    head_dims: Callable[[Model], tuple[float, float]]


@dataclass(frozen=True)
class Workload:
    """One workload family.

    ``recognises(model)`` says whether a scenario's model section is of this family (the registry
    asks the families in order; the default family takes what no other recognises).
    ``spec(scenario)`` is what one GPU computes, keeps and communicates per pipeline unit; it may
    read what explorer/estimate/keys.compute_key names (the model, the GPU, the training options
    but the global batch and optimizer, the tp/cp/ep/sequence-parallel/token-slice degrees), which
    the estimator memoises it on.  ``params(scenario)`` the model's trainable parameters, all GPUs
    together.
    ``dimensions``: the communication dimensions its layers and edges use (names of the
    communication-dimension registry: tp, cp, ep, pp, dp); a scenario that asks for another one
    is refused (:func:`explorer.workloads.registry.problem`).  ``estimator``: the vectorised
    estimator prices it (its layers come in at most two kinds, in two runs at most — the
    estimator's pieces, explorer/estimate/chunk_basis.py); otherwise its rows are simulated.
    ``powersgd_factor(model, tp, rank)``: PowerSGD's (P + Q elements) / (gradient elements) of its
    weight matrices (explorer/network/compression.py); None when gradient compression is not
    modelled for it.  ``controls``: the model fields the app's sidebar shows for it, as
    (dotted key, label, widget kind); ``caption(model)`` what the sidebar says in place of the
    other families' fields (None: nothing), ``summary`` in one line what the family is (said
    instead while the model is not valid yet).  ``samples_per_epoch(model, dp)``: the samples
    of one epoch (a GNN's training nodes; a full-graph pass's partitions), None when the family
    has no epoch of its own; the app's epoch card and run --json's ``epoch_s`` read it.
    """

    name: str
    recognises: Callable[[Model], bool]
    spec: Callable[[Scenario], WorkloadSpec]
    params: Callable[[Scenario], float]
    nouns: Callable[[Model], Nouns]
    dimensions: tuple[str, ...]
    estimator: bool
    powersgd_factor: Callable[[Model, int, int], float] | None
    controls: tuple[tuple[str, str, str], ...] = ()
    caption: Callable[[Model], str] | None = None
    summary: str = ""
    citation: str = ""
    samples_per_epoch: Callable[[Model, int], int] | None = None
    # ``host_input(scenario)``: the host's work for each pipeline unit (:class:`HostInput`), None
    # when it has none; the steady state paces a pipelined one, the bottleneck sentence names it.
    host_input: Callable[[Scenario], HostInput | None] | None = None
    attention: Attention | None = None       # what serving reads; None: the family is not served
    # What a layout search varies for it (explorer/design/space.py) beyond the degrees it uses:
    # ``search_axes`` its own fields, as (dotted key, candidate values); ``search_fixed`` the
    # generic choices that do not apply to it, as (Space field, the one value to keep), e.g. a
    # recompute policy its layers ignore; ``whole_batch``: its micro-batch is the replica's batch
    # or a few accumulation steps of it (a DLRM's 6,912 samples per GPU), not a power of two <= 16.
    search_axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    search_fixed: tuple[tuple[str, Any], ...] = ()
    whole_batch: bool = False

    @property
    def pipeline_split(self) -> bool:
        """Its layers may be split over pipeline stages (it sends activations between them)."""
        return "pp" in self.dimensions

    @property
    def compression(self) -> bool:
        """Gradient compression (communication.compression) is modelled for it."""
        return self.powersgd_factor is not None

    @cached_property
    def models_everything(self) -> bool:
        """Every parallel degree and gradient compression are modelled for it: nothing a valid
        scenario asks can be refused (registry.problem's quick answer, asked for every row)."""
        return set(DEGREES) <= set(self.dimensions) and self.compression

    @property
    def control_keys(self) -> frozenset[str]:
        """The dotted keys of its sidebar controls."""
        return frozenset(k for k, _, _ in self.controls)
