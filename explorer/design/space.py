"""The layout space of a search: every parallel layout of one model on one cluster worth scoring.

A :class:`Layout` is the set of fields a search chooses — tp, pp, cp, ep, vpp, schedule, ZeRO
stage, micro-batch, recompute and sequence parallelism; dp is derived as GPUs / (tp·pp·cp).  Its
rank placement and layer split are the scenario's own and the simulator's balanced one here; a
refined search varies them on its best layouts (explorer/design/refine.py).
:func:`enumerate_layouts` lists them with arithmetic pruning only (no scenario is built):

- tp divides the GPUs of a node (tensor parallelism stays on NVLink);
- cp is 1 or a power of two with seq_len divisible by 2·cp (load-balanced ring attention) and at
  least MIN_CP_TOKENS tokens per rank (shorter shards cannot hide the K/V exchange);
- pp divides GPUs / (tp·cp) and is at most the layer count;
- dp divides the global batch, the micro-batch is a power of two up to MAX_MICRO_BATCH (or the
  scenario's own micro-batch where it is larger: a ResNet's 64 images) dividing global_batch / dp;
- schedules are the registry's synchronous ones (:func:`synchronous_schedules`; PipeDream's
  asynchronous one only when named in :class:`Space`); the latency-timed ones only where a
  pipeline boundary of the layout joins two datacenters (:func:`pipeline_crosses`): elsewhere their
  order is their base order, the same layout again, and each one is a full simulation;
- pp = 1 runs the registry's default schedule only (every schedule is the same without a pipeline);
  a schedule with virtual stages (interleaved) takes vpp from VPP_CHOICES with pp·vpp <= layers,
  the others vpp = 1; a V placement (zb-v, v-half, v-min, dualpipe-v: 2 chunks per rank) needs
  2·pp - 2 <= layers (config rule_layers_fill_chunks: two chunks may hold an end alone).  Layers
  need not divide pp·vpp: the simulator balances uneven stages, as Llama 3 ran 126 layers on 16
  stages;
- ep is 1 for a dense model, else a divisor of the experts that divides dp·cp;
- sequence parallelism only where tp > 1 (it is a no-op without TP);
- a workload family (explorer/workloads/registry.py) is searched over what it models: the degrees
  of its communication dimensions only (a DLRM: dp), the generic choices it does not fix
  (``search_fixed``: a recompute policy its layers ignore), its own fields (``search_axes``: a
  DLRM's sharding plans and replication threshold, carried by :attr:`Layout.extra`), and, for a
  family that trains on the replica's whole batch (``whole_batch``: a DLRM's 6,912 samples per GPU,
  a GNN's 1,024 seeds), micro-batches of that batch over 1, 2, 4, 8 or 16 accumulation steps.

Everything else (the registry's schedule rules, tp against the heads, the work budget, ...) is left
to the scenario rules: :class:`LayoutBuilder` builds each layout's :class:`Scenario` exactly as
``from_dict(apply_overrides(raw, layout.overrides()))`` would (a test checks it), 100x faster,
by replacing fields of a scenario parsed once and re-running the loader's defaults and rules.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..config.frozen import evolve
from ..config.loading import resolve_presets
from ..config.recompute import DEFAULT_MODULES, recompute_in_force
from ..config.replica_rules import auto_replicas
from ..config.schema import build
from ..fold.admit import unproven
from ..scenario import Scenario, fill_defaults, validate
from ..schedules import registry
from ..workloads.registry import workload_for

MIN_CP_TOKENS = 1024
MAX_MICRO_BATCH = 16
VPP_CHOICES = (2, 3, 4, 6, 8)
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
REFINE = 16        # best layouts whose placements and layer splits a refined search scores


@dataclass(frozen=True, order=True)
class Layout:
    """The fields a search chooses (dp follows from them and the GPU count)."""

    tp: int
    pp: int
    cp: int
    ep: int
    vpp: int
    schedule: str
    zero: int
    micro_batch: int
    recompute: str
    sequence_parallel: bool
    # The refinement's dimensions (explorer/design/placements.py): "" = the scenario's own rank
    # placement, () = the simulator's balanced layer split.
    order: str = ""
    pipeline_layout: tuple[int, ...] = ()
    # A workload family's own fields (Workload.search_axes), as (dotted key, value) pairs.
    extra: tuple[tuple[str, Any], ...] = ()

    def overrides(self) -> dict[str, Any]:
        """The layout as dotted-key overrides of a scenario (dp left to be derived; the placement
        and the layer split only when the layout sets them)."""
        out: dict[str, Any] = {
            "parallelism.tp": self.tp, "parallelism.pp": self.pp, "parallelism.cp": self.cp,
            "parallelism.ep": self.ep, "parallelism.vpp": self.vpp, "parallelism.schedule": self.schedule,
            "parallelism.zero": self.zero, "parallelism.sequence_parallel": self.sequence_parallel,
            "training.micro_batch": self.micro_batch, "training.recompute": self.recompute}
        if self.recompute == "none":
            # Modules a file names would make none selective (config/recompute.py): a hunt found
            # search's "recompute none" rows priced as selective.  None means none here.
            out["training.recompute_modules"] = list(DEFAULT_MODULES)
        if self.order:
            out["parallelism.order"] = self.order
        if self.pipeline_layout:
            out["parallelism.pipeline_layout"] = list(self.pipeline_layout)
        out.update(self.extra)
        return out

    @classmethod
    def of(cls, sc: Scenario) -> Layout:
        """The layout a scenario runs (a loaded or a merely parsed one: the fields are the same)."""
        p, t = sc.parallelism, sc.training
        extra = tuple((k, _field(sc, k)) for k, _ in workload_for(sc.model).search_axes)
        # The policy in force: a file's modules under recompute none are recomputed (selective).
        return cls(p.tp, p.pp, p.cp, p.ep, p.vpp, p.schedule, p.zero, t.micro_batch, recompute_in_force(t),
                   p.sequence_parallel, extra=extra)

    def label(self) -> str:
        """One short line: ``tp 8 · pp 16 · cp 1 · ep 1 · interleaved v2 · ZeRO 1 · mb 1 · none · SP``."""
        sched = f"{self.schedule} v{self.vpp}" if self.vpp > 1 else self.schedule
        return (f"tp {self.tp} · pp {self.pp} · cp {self.cp} · ep {self.ep} · {sched} · ZeRO {self.zero} · "
                f"mb {self.micro_batch} · recompute {self.recompute}"
                + (" · SP" if self.sequence_parallel else "") + self.refined_label()
                + "".join(f" · {x}" for x in family_labels(self.extra)))

    def refined_label(self) -> str:
        """The placement and layer split when set: `` · order dp-tp-pp-cp · layers 7|9|9|7``."""
        return ((f" · order {self.order}" if self.order else "")
                + (" · layers " + "|".join(map(str, self.pipeline_layout)) if self.pipeline_layout else ""))


def family_labels(extra: Iterable[tuple[str, Any]]) -> list[str]:
    """A family's own fields (Layout.extra, or search --json's ``layout.family`` items) as short
    labels: the key's last part and the value (``sharding table_row_wise``)."""
    return [f"{k.split('.')[-1]} {v}" for k, v in extra]


def _field(sc: Scenario, key: str) -> Any:
    """The value of dotted ``key`` in ``sc`` (``model.dlrm.sharding`` -> sc.model.dlrm.sharding)."""
    node: Any = sc
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two_dividing(n: int, limit: int) -> list[int]:
    out, d = [], 1
    while d <= limit and n % d == 0:
        out.append(d)
        d *= 2
    return out


@dataclass(frozen=True)
class Space:
    """Which values a search may choose beyond the arithmetic of the module docstring (defaults:
    all of them); narrowing it makes a search faster."""

    schedules: tuple[str, ...] = ()               # () = every synchronous schedule of the registry
    zero: tuple[int, ...] = ZERO_STAGES
    recompute: tuple[str, ...] = RECOMPUTE
    max_micro_batch: int | None = None            # None: micro_batch_limit's default
    vpp: tuple[int, ...] = VPP_CHOICES
    sequence_parallel: tuple[bool, ...] = (False, True)
    # Rank placements and per-stage layer splits (explorer/design/refine.py), searched on the
    # ``refine`` best layouts of the uniform space when switched on.
    orders: bool = False
    splits: bool = False
    refine: int = REFINE


# Accumulation steps a whole-batch family's micro-batch may take (Workload.whole_batch).
WHOLE_BATCH_STEPS = (1, 2, 4, 8, 16)


def _family_space(sc: Scenario, space: Space) -> tuple[Space, dict[str, bool], list[tuple], bool]:
    """``space`` narrowed to what ``sc``'s workload family models (module docstring): the space,
    which degrees it varies, the products of its own fields' values and whether its micro-batches
    are steps of the whole batch."""
    fam = workload_for(sc.model)
    fixed = dict(fam.search_fixed)
    changes: dict[str, Any] = {k: (v,) for k, v in fixed.items()}
    space = replace(space, **changes)
    uses = {d: d in fam.dimensions for d in ("tp", "cp", "pp", "ep")}
    extras = [tuple(zip((k for k, _ in fam.search_axes), values, strict=True))
              for values in itertools.product(*(v for _, v in fam.search_axes))]
    return space, uses, extras, fam.whole_batch


def micro_batch_limit(sc: Scenario, space: Space) -> int:
    """The largest micro-batch ``space`` tries: its own limit, else MAX_MICRO_BATCH or the scenario's
    own micro-batch where larger (a hunt found resnet50-cloud-dp's 64 images never searched, nor the
    32 that fit with room where its own 64 left 0.2 GB)."""
    if space.max_micro_batch is not None:
        return space.max_micro_batch
    return max(MAX_MICRO_BATCH, sc.training.micro_batch)


def _micro_batches(per_replica: int, whole: bool, limit: int) -> list[int]:
    if not whole:
        return _powers_of_two_dividing(per_replica, limit)
    return [per_replica // k for k in WHOLE_BATCH_STEPS if per_replica % k == 0][::-1]


def enumerate_layouts(sc: Scenario, space: Space = Space()) -> Iterator[Layout]:
    """Every layout of the module docstring for ``sc``'s model, batch and cluster, in a fixed order."""
    gpus, per_node = sc.cluster.gpus, sc.cluster.gpus_per_node
    m, batch = sc.model, sc.training.global_batch
    limit = micro_batch_limit(sc, space)
    space, uses, extras, whole = _family_space(sc, space)
    schedules = space.schedules or synchronous_schedules(wan=sc.cluster.datacenters > 1)
    untimed = tuple(n for n in schedules if not is_timed(n))
    dc = datacenter_block(sc)
    for tp in (d for d in _divisors(per_node) if gpus % d == 0 and (uses["tp"] or d == 1)):
        cps = [c for c in _powers_of_two_dividing(gpus // tp, gpus)
               if c == 1 or (uses["cp"] and m.seq_len % (2 * c) == 0 and m.seq_len // c >= MIN_CP_TOKENS)]
        sps = [s for s in space.sequence_parallel if tp > 1 or not s] or [False]
        for cp in cps:
            for pp in (d for d in _divisors(gpus // (tp * cp)) if d <= m.layers and (uses["pp"] or d == 1)):
                dp = gpus // (tp * cp * pp)
                if batch % dp:
                    continue
                eps = ([e for e in _divisors(m.moe.experts) if (dp * cp) % e == 0]
                       if m.moe is not None and m.is_moe and uses["ep"] else [1])
                names = schedules if pipeline_crosses(sc.parallelism.order, tp, cp, dp, pp, dc) else untimed
                for sched, vpp in _schedules(pp, m.layers, names, space.vpp):
                    for mb in _micro_batches(batch // dp, whole, limit):
                        for ep in eps:
                            for zero in space.zero:
                                for rc in space.recompute:
                                    for sp in sps:
                                        for extra in extras:
                                            yield Layout(tp, pp, cp, ep, vpp, sched, zero, mb, rc, sp,
                                                         extra=extra)


def is_timed(schedule: str) -> bool:
    """Whether ``schedule``'s order reads the link delays (registry ``timed``: 1f1b-latency,
    crosspipe): each such layout is a full simulation, the estimator has no program for it."""
    return registry.get(schedule).timed is not None


def synchronous_schedules(wan: bool = True) -> tuple[str, ...]:
    """The registry's schedules that keep synchronous SGD: all but those that never flush
    (PipeDream's asynchronous weight stashing trains on stale weights, a different optimisation,
    so it competes only when asked for by name).  Without a WAN (``wan`` False: one datacenter) the
    latency-timed schedules are left out: with no link delay their order is their base order, so
    they would only repeat those layouts."""
    return tuple(n for n in registry.names() if registry.get(n).window is not registry.Window.ASYNC
                 and (wan or not is_timed(n)))


def datacenter_block(sc: Scenario) -> int | None:
    """GPUs that every datacenter holds a whole number of (their sizes' gcd), None in one datacenter:
    datacenters are consecutive GPU ids (topology.Fabric), so a block of this size never straddles one."""
    c = sc.cluster
    if c.datacenters < 2:
        return None
    nodes = c.datacenter_nodes or (c.nodes // c.datacenters,)
    return math.gcd(*nodes) * c.gpus_per_node


def pipeline_crosses(order: str, tp: int, cp: int, dp: int, pp: int, block: int | None) -> bool:
    """Whether a pipeline boundary may join two datacenters (``block`` from :func:`datacenter_block`):
    stage s starts s x stride(pp) GPUs after stage 0 (placement.Placement: the dimensions before pp
    in ``order``), so the pipelines stay inside datacenters when pp x stride divides the block, and
    are taken to cross otherwise."""
    if block is None or pp < 2:
        return False
    sizes, stride = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}, 1
    for dim in order.split("-"):
        if dim == "pp":
            break
        stride *= sizes.get(dim, 1)
    return block % (pp * stride) != 0


def work_key(layout: Layout, gpus: int, batch: int) -> tuple[tuple[int, int, str], tuple[int, int, int]]:
    """How a search groups layouts into chunks (chunks.grouped): the group (-pp, micro-batches per
    iteration, the schedule when its program serves its own unit count only, else ""), the rank
    (tp, cp, micro-batch).  The estimator's costliest pieces are memoised on the pipeline depth and
    the unit count (a count-shaped schedule's program), its layer splits on the degrees and the
    micro-batch (the compute key, pricing/keys.py); the deepest pipelines, the slowest to
    estimate, come first, so that the last chunks a pool hands out are short.  The count is 0
    where the layout's dp does not divide the GPUs and the batch (the rules refuse it)."""
    cells = layout.tp * layout.cp * layout.pp
    dp = gpus // cells if cells and gpus % cells == 0 else 0
    per = dp * layout.micro_batch
    count = batch // per if per and batch % per == 0 else 0
    exact = layout.schedule if registry.get(layout.schedule).exact_units else ""
    return (-layout.pp, count, exact), (layout.tp, layout.cp, layout.micro_batch)


def _schedules(pp: int, layers: int, names: tuple[str, ...], vpps: tuple[int, ...]) -> list[tuple[str, int]]:
    """(schedule, vpp) pairs for ``pp`` stages (module docstring)."""
    if pp == 1:
        return [(registry.DEFAULT, 1)]
    out = []
    for name in names:
        sched = registry.get(name)
        if sched.virtual_stages:
            out += [(name, v) for v in vpps if v > 1 and pp * v <= layers]
        elif sched.placement is not registry.Placement.V or 2 * pp - 2 <= layers:
            out.append((name, 1))
    return out


def search_raw(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` ready for layouts: dp derived and no explicit layer split (both follow the layout)."""
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in raw.items()}
    par = out.get("parallelism")
    if isinstance(par, dict):
        par.pop("dp", None)
        par.pop("stage_layers", None)
        par.pop("pipeline_layout", None)
    return out


class LayoutBuilder:
    """Builds a layout's validated Scenario on a raw base (from :func:`search_raw`) without parsing
    the base again: the parsed, not yet defaulted base is kept and each layout replaces its fields,
    then the loader's :func:`fill_defaults` and rules run as in ``from_dict``.  A base with
    ``parallelism.stage_replicas: auto`` keeps ``auto`` in every layout (pp zeros, as the loader
    writes it for the layout's pp): each layout's replicas are what ``auto`` picks for it when it is
    priced (fold/replica_choice.resolved)."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw
        self._parsed = build(Scenario, auto_replicas(resolve_presets(raw)))
        r = self._parsed.parallelism.stage_replicas
        self._auto = bool(r) and not any(r)

    @property
    def parsed(self) -> Scenario:
        """The base as parsed, derived defaults not filled and cross-field rules not checked (its
        model, batch and cluster are what a layout enumeration reads)."""
        return self._parsed

    def scenario(self, layout: Layout) -> Scenario:
        """The validated scenario of ``layout`` (ScenarioError, as from_dict raises, when invalid);
        a fold it is admitted for is not proven at load (:meth:`Base.scenario`'s reason)."""
        with unproven():
            return self._scenario(layout)

    def _scenario(self, layout: Layout) -> Scenario:
        if layout.extra:       # a family's own fields: the loader's path (a DLRM search is small)
            from ..scenario import apply_overrides, from_dict
            return from_dict(search_raw(apply_overrides(self._raw, layout.overrides())))
        s = self._parsed
        # evolve, not dataclasses.replace: the sections have no __post_init__ (config/frozen.py).
        par = evolve(s.parallelism, tp=layout.tp, pp=layout.pp, cp=layout.cp, ep=layout.ep, vpp=layout.vpp,
                     schedule=layout.schedule, zero=layout.zero, sequence_parallel=layout.sequence_parallel,
                     dp=None, stage_layers=None, pipeline_layout=layout.pipeline_layout or None)
        if self._auto:
            par = evolve(par, stage_replicas=(0,) * layout.pp)
        if layout.order:
            par = evolve(par, order=layout.order)
        tr = evolve(s.training, micro_batch=layout.micro_batch, recompute=layout.recompute)
        if layout.recompute == "none":            # as Layout.overrides: none means none
            tr = evolve(tr, recompute_modules=DEFAULT_MODULES)
        sc = fill_defaults(evolve(s, parallelism=par, training=tr))
        validate(sc)
        return sc
