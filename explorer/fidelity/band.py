"""The regime of a scenario, and the error band the published runs of that regime give it.

Every ``run`` reports how far its number may be off: the mean |error| of the fidelity report's
*validation* training runs (rows never fitted to, ``data/reference/training_runs.csv``) that ran in
the same regime.  A regime is six coarse facts of a scenario, most general first:

    GPU generation · context length band · framework · precision · dense/MoE · scale band

The per-regime numbers are a generated table, ``data/reference/error_bands.csv`` (written by
``python bench/calibrate.py --write-bands``; :mod:`explorer.fidelity.bands` computes it), because
simulating every reference row at each run would take seconds.  Lookup takes the scenario's full
regime; with fewer than :data:`MIN_ROWS` validation rows there it widens to the parent regime
and says so.  Widening drops the scale, then the precision, the framework and the context band —
the GPU generation and the architecture are kept longest (:data:`KEPT`): a MoE run is not judged
by dense runs of the same stack, nor a dense one by MoE runs, whose errors differ several-fold
(Megatron-Bridge 25.11's MoE rows are +100 % to +236 % fast where its dense rows are within 10 %).
Where only one or two validation rows share the GPU generation and the architecture, the band is
their worst error; where none does, the worst error of the runs it widens to (the architecture's
first).  Setups no published run resembles — a
convolutional network, datacenters joined by a WAN, heterogeneous GPUs, low-communication or
decentralised training, a scale-out network under 100 Gb/s per GPU, a GPU outside the measured
generations, fp32 — get no number
(``expected_error`` null) and a sentence saying why: a band borrowed from LLM pre-training runs on
one cluster would be a guess dressed as a measurement.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..config import Scenario
from ..config.generations import runs_fp8
from ..config.presets import datasheet_name
from ..workloads.registry import workload_for

TABLE = Path(__file__).parents[1] / "data" / "reference" / "error_bands.csv"
# The facts of a regime, most general first: widening drops them from the end.
DIMENSIONS = ("gpu", "context", "framework", "precision", "arch", "scale")
# The order facts are kept in while a band widens (the last is dropped first): the architecture and
# the GPU generation are structural — the model's errors differ most across them — so they go last.
KEPT = ("arch", "gpu", "context", "framework", "precision", "scale")
STRUCTURAL_LEVEL = 2     # a key keeping KEPT[:2] (architecture and GPU generation) and nothing else
ANY = "*"
MIN_ROWS = 3            # fewer validation rows than this is not a band: widen to the parent regime
# The slowest scale-out of any published run is 200 Gb/s per GPU (DGX A100's 8 x HDR, MosaicML's
# 1600 Gbps RoCE per 8 A100s); a multi-node cluster below half of that is a communication-bound
# regime no published run measured (e.g. one 25 GbE NIC per node).
MIN_SCALE_OUT_GBPS_PER_GPU = 100.0

# Display names of the values (the CSV keeps the short ones).
SHOWN = {"ampere": "A100", "hopper": "Hopper", "blackwell": "Blackwell",
         "le4k": "≤4K context", "4k-32k": "4K–32K context", "gt32k": ">32K context",
         "megatron": "Megatron", "deepspeed": "DeepSpeed", "megatron-deepspeed": "Megatron-DeepSpeed",
         "fsdp": "FSDP", "bf16": "BF16", "fp8": "FP8", "dense": "dense", "moe": "MoE",
         "le64": "≤64 GPUs", "65-1024": "65–1,024 GPUs", "gt1024": ">1,024 GPUs"}
# Frameworks grouped with published runs of the same stack: FSDP2 and torchtitan (FSDP2 + compile)
# are PyTorch FSDP, whose published rows (llm-foundry's FSDP1, torchtitan's FSDP2) form one regime.
FAMILY = {"fsdp2": "fsdp", "torchtitan": "fsdp"}
# GPU generation by the preset's display name (explorer/data/gpus.yaml): Ampere, Hopper (H100,
# H800, H200) and Blackwell (B200, GB200, GB300).
GENERATIONS = (("A100", "ampere"), ("H100", "hopper"), ("H800", "hopper"), ("H200", "hopper"),
               ("GB200", "blackwell"), ("GB300", "blackwell"), ("B200", "blackwell"), ("B300", "blackwell"))


@dataclass(frozen=True)
class Regime:
    """The six facts of a scenario that published runs are grouped by (values as in the CSV)."""

    gpu: str            # ampere | hopper | blackwell
    context: str        # le4k | 4k-32k | gt32k  (model.seq_len)
    framework: str      # training.framework
    precision: str      # bf16 (bf16 or fp16) | fp8
    arch: str           # dense | moe
    scale: str          # le64 | 65-1024 | gt1024  (GPUs)

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(getattr(self, d) for d in DIMENSIONS)


@dataclass(frozen=True)
class Outside:
    """A scenario no published run resembles, and why."""

    reason: str


@dataclass(frozen=True)
class Band:
    """What a run reports of its regime's published runs."""

    expected_error: float | None    # validation mean |error| of the regime used, None outside
    rows: int                       # validation rows behind it
    max_error: float | None
    regime: str                     # the regime used, in words ("" outside)
    widened: bool                   # whether the scenario's own regime had too few rows
    label: str                      # one sentence for the card and the CLI


def _generation(name: str) -> str | None:
    upper = name.upper()
    return next((gen for tag, gen in GENERATIONS if tag in upper), None)


def _band(value: int, edges: tuple[int, int], names: tuple[str, str, str]) -> str:
    return names[0] if value <= edges[0] else names[1] if value <= edges[1] else names[2]


def classify(sc: Scenario) -> Regime | Outside:
    """The regime of ``sc``, or why no published training run is like it."""
    if sc.inference is not None:           # issue 37: compared with serving measurements instead
        return Outside("LLM serving (the published runs are training; serving is compared with vLLM, "
                       "TensorRT-LLM and DeepSeek figures: tests/test_serving_published.py)")
    family = workload_for(sc.model)
    if family.name != "transformer":       # its summary names it: "A convolutional network: ..."
        what = family.summary.split(":")[0].lower() or f"a {family.name} model"
        return Outside(f"{what} (the published runs are transformer LLM pre-training)")
    if sc.cluster.heterogeneous:
        return Outside("datacenters of different sizes or GPUs")
    if sc.cluster.datacenters > 1:
        return Outside("datacenters joined by a WAN (the published runs ran on one cluster)")
    if sc.training.sync.kind != "every-step":
        return Outside(f"low-communication training ({sc.training.sync.kind})")
    if sc.parallelism.dp_kind != "allreduce":
        return Outside(f"decentralised data parallelism ({sc.parallelism.dp_kind})")
    out = sc.cluster.scale_out
    per_gpu = (out.nic_Gbps or 0.0) * out.nics_per_node / sc.cluster.gpus_per_node
    if sc.cluster.nodes > 1 and per_gpu < MIN_SCALE_OUT_GBPS_PER_GPU:
        return Outside(f"a scale-out network of {per_gpu:.3g} Gb/s per GPU (published runs: 200 Gb/s "
                       "per GPU or more)")
    gen = _generation(datasheet_name(sc.hardware.gpu))
    if gen is None:
        # Not the GPU's name: the label is shown as Markdown and the name is user text.
        return Outside("a GPU outside the measured generations (A100, Hopper, Blackwell)")
    if sc.training.dtype not in ("bf16", "fp16", "fp8"):
        return Outside(f"{sc.training.dtype} training (published runs: BF16/FP16 and FP8)")
    return Regime(gpu=gen,
                  context=_band(sc.model.seq_len, (4096, 32768), ("le4k", "4k-32k", "gt32k")),
                  framework=FAMILY.get(sc.training.framework, sc.training.framework),
                  precision="fp8" if runs_fp8(sc) else "bf16",      # an A100 runs the recipe in bf16
                  arch="moe" if sc.model.is_moe else "dense",
                  scale=_band(sc.gpus, (64, 1024), ("le64", "65-1024", "gt1024")))


def widened(key: tuple[str, ...], level: int) -> tuple[str, ...]:
    """``key`` (in :data:`DIMENSIONS` order) keeping only the first ``level`` facts of :data:`KEPT`,
    the others replaced by :data:`ANY`."""
    keep = set(KEPT[:level])
    return tuple(v if d in keep else ANY for d, v in zip(DIMENSIONS, key, strict=True))


def dropped(key: tuple[str, ...], level: int) -> tuple[str, ...]:
    """The facts of ``key`` that :func:`widened` at ``level`` replaces (the others :data:`ANY`)."""
    keep = set(KEPT[:level])
    return tuple(ANY if d in keep else v for d, v in zip(DIMENSIONS, key, strict=True))


def describe(key: tuple[str, ...]) -> str:
    """The regime in words: its facts that are set, joined by middle dots ("all published runs"
    when none is)."""
    facts = [SHOWN.get(v, v) for v in key if v != ANY]
    return " · ".join(facts) if facts else "all published runs"


@dataclass(frozen=True)
class BandRow:
    """One line of the error-band table: a regime (``*`` = any) and its validation rows' errors."""

    key: tuple[str, ...]
    rows: int
    mean: float
    max: float


def read_table(path: Path = TABLE) -> dict[tuple[str, ...], BandRow]:
    """The error-band table by regime key (empty when the file is missing)."""
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    out = {}
    for r in csv.DictReader(lines):
        key = tuple(r[d] for d in DIMENSIONS)
        out[key] = BandRow(key, int(r["rows"]), float(r["mean_abs_error"]), float(r["max_abs_error"]))
    return out


@cache
def _table() -> dict[tuple[str, ...], BandRow]:
    return read_table()


# Facts no band may borrow a mean for: a GPU generation and architecture (dense/MoE) that no
# validation row shares together is a regime the model was never checked in, not a neighbour of one.
STRUCTURAL = ("gpu", "arch")


def unvalidated(key: tuple[str, ...], table: dict[tuple[str, ...], BandRow]) -> list[str]:
    """The :data:`STRUCTURAL` facts of ``key`` when no validation row of ``table`` shares them all
    (both named: an A100 MoE run is unvalidated though A100 runs and MoE runs each exist), else []."""
    row = table.get(widened(key, STRUCTURAL_LEVEL))
    if row is not None and row.rows > 0:
        return []
    return [key[DIMENSIONS.index(f)] for f in STRUCTURAL]


def lookup(regime: Regime | Outside, table: dict[tuple[str, ...], BandRow] | None = None) -> Band:
    """The band of ``regime``: its own validation rows, or its nearest parent's with at least
    :data:`MIN_ROWS` (saying it widened), or no number outside the measured regimes.  Widening keeps
    the architecture and GPU generation (:data:`KEPT`); where fewer than :data:`MIN_ROWS`
    validation rows share both, the band is their worst error; where none does
    (:func:`unvalidated`), the worst error of the rows it widens to: nothing says the model does
    as well there."""
    if isinstance(regime, Outside):
        return Band(None, 0, None, "", False, f"no published runs of this kind: {regime.reason}")
    table = _table() if table is None else table
    key = regime.key
    for level in range(len(DIMENSIONS), -1, -1):
        row = table.get(widened(key, level))
        if level == STRUCTURAL_LEVEL and row is not None and 0 < row.rows < MIN_ROWS:
            # The runs of its own architecture and generation are too few for a mean and too
            # different from the others' to borrow one: their worst error.
            where = describe(row.key)
            runs = "1 published run validates" if row.rows == 1 else f"{row.rows} published runs validate"
            label = f"only {runs} {where}: ±{row.max * 100:.0f} %, the worst of them"
            return Band(row.max, row.rows, row.max, where, True, label)
        if row is None or row.rows < MIN_ROWS:
            continue
        where = describe(row.key)
        unchecked = unvalidated(key, table) if level < len(DIMENSIONS) else []
        if unchecked:
            named = " · ".join(SHOWN.get(v, v) for v in unchecked)
            label = (f"no published run validates {named}: ±{row.max * 100:.0f} %, the worst error of "
                     f"{row.rows} similar runs ({where})")
            return Band(row.max, row.rows, row.max, where, True, label)
        label = f"similar published runs: ±{row.mean * 100:.0f} %, {row.rows} rows ({where}"
        if level < len(DIMENSIONS):
            own = table.get(key)
            ignored = describe(dropped(key, level))     # the facts the band ignores
            matched = own.rows if own else 0
            rows = "1 row" if matched == 1 else f"{matched} rows"
            label += f"; widened over {ignored}: {rows} matched all six facts"
        label += ")"
        return Band(row.mean, row.rows, row.max, where, level < len(DIMENSIONS), label)
    return Band(None, 0, None, "", False, "no published runs of this kind: the error-band table is empty "
                                          "(python bench/calibrate.py --write-bands)")


def band_of(sc: Scenario) -> Band:
    """The error band of a scenario's result (see the module docstring); a LoRA run's label says its
    rows trained every weight (a re-check found LoRA runs quoting pre-training bands unsaid)."""
    band = lookup(classify(sc))
    if sc.training.lora_rank and band.expected_error is not None:
        return replace(band, label=f"{band.label}; none of them LoRA fine-tuning")
    return band


def band_json(sc: Scenario) -> dict[str, Any]:
    """The ``expected_error*`` keys ``run --json`` adds to a result's JSON summary (the CLI and the
    app's cache add them: the Result record sits below this layer, tests/test_layers.py)."""
    band = band_of(sc)
    return {"expected_error": band.expected_error, "expected_error_rows": band.rows,
            "expected_error_max": band.max_error, "expected_error_regime": band.regime,
            "expected_error_widened": band.widened, "expected_error_label": band.label}


def with_band(summary: dict[str, Any], sc: Scenario) -> dict[str, Any]:
    """A result's JSON summary (``Result.to_json_dict``) with :func:`band_json` of its scenario."""
    return {**summary, **band_json(sc)}
