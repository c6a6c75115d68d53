"""A recommendation model's section (``model.dlrm``, ``model.kind: dlrm``): embedding tables, the
sharding plan, the dense MLPs and the interaction (explorer/workloads/dlrm/ prices it).

The defaults are DLRM-DCNv2 as MLPerf Training runs it (mlcommons/training,
recommendation_v2/torchrec_dlrm/README.MD, "Running the MLPerf DLRM v2 benchmark"): 26 tables of
``--num_embeddings_per_feature 40000000,39060,...,36``, ``--multi_hot_sizes 3,2,...,1``,
``--embedding_dim 128``, ``--dense_arch_layer_sizes 512,256,128`` over 13 dense features,
``--interaction_type=dcn --dcn_num_layers=3 --dcn_low_rank_dim=512``,
``--over_arch_layer_sizes 1024,1024,512,256,1``, ``--adagrad``.

The loader derives the transformer fields from it (:func:`derive`): a sample is one example
(seq_len 1), layers = the pipeline layers the workload builds (the embedding layer, the bottom
MLP's, the cross layers, the top MLP's), hidden = the embedding dimension, vocab = 1 (one logit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model_parts import refuse_parts
from .schema import ScenarioError, build

# MLPerf Training DLRM-DCNv2 (README above): rows and multi-hot pooling of the 26 sparse features.
MLPERF_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
               2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
MLPERF_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
# TorchRec's sharding types (torchrec/distributed/types.py ShardingType) this model prices, one plan
# for every table too large for data parallelism (explorer/workloads/dlrm/sharding.py).
SHARDINGS = ("table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel")
# The derived transformer fields (loading.derive_model): what they become for a DLRM.
DLRM_DERIVED = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab", "dropout",
                "tied_embeddings")


@dataclass(frozen=True)
class Dlrm:
    """A DLRM / DCNv2 recommendation model (see the module docstring for the defaults' source)."""

    tables: int = field(default=26, metadata={"min": 1, "max": 100_000,
                                              "doc": "embedding tables (sparse features)"})
    rows: tuple[int, ...] = field(default=MLPERF_ROWS, metadata={
        "min": 1, "max": 100_000_000_000, "min_items": 1, "max_items": 100_000,
        "doc": "rows of each table; table i has rows[i mod len(rows)] (one value: every table)"})
    pooling: tuple[int, ...] = field(default=MLPERF_POOLING, metadata={
        "min": 1, "max": 100_000, "min_items": 1, "max_items": 100_000,
        "doc": "pooling factor (multi-hot ids per sample) of each table, i mod len as for rows"})
    dim: int = field(default=128, metadata={"min": 1, "max": 65536, "doc": "embedding dimension d"})
    table_dtype: str = field(default="fp32", metadata={
        "choices": ("fp32", "fp16"), "doc": "element type of the tables (the exchanged embeddings use "
                                            "training.dtype's, fp32 for fp32 training)"})
    hot_share: float = field(default=0.0, metadata={
        "min": 0.0, "max": 0.99, "doc": "share of lookups that hit hot rows held in the GPU's cache "
                                        "(read from L2, not HBM): the id distribution's skew"})
    sharding: str = field(default="table_wise", metadata={
        "choices": SHARDINGS, "doc": "TorchRec sharding plan of the tables above dp_max_rows: "
                                     "table_wise, row_wise, column_wise, table_row_wise (each table on one "
                                     "node, row-wise over its GPUs), or data_parallel (replicated)"})
    dp_max_rows: int = field(default=0, metadata={
        "min": 0, "max": 100_000_000_000, "doc": "tables with at most this many rows are replicated "
                                                 "(data parallel, gradients all-reduced); 0 = none"})
    dense_features: int = field(default=13, metadata={"min": 0, "max": 100_000,
                                                      "doc": "dense (continuous) input features"})
    bottom_mlp: tuple[int, ...] = field(default=(512, 256, 128), metadata={
        "min": 1, "max": 1_000_000, "max_items": 64, "doc": "bottom MLP widths; the last must equal dim"})
    interaction: str = field(default="dcn", metadata={
        "choices": ("dcn", "dot"), "doc": "dcn = DCNv2 low-rank cross layers (Wang et al. 2021); dot = "
                                          "DLRM's pairwise dot products (Naumov et al. 2019)"})
    cross_layers: int = field(default=3, metadata={"min": 0, "max": 64, "doc": "DCNv2 cross layers"})
    cross_rank: int = field(default=512, metadata={"min": 1, "max": 65536,
                                                   "doc": "DCNv2 low-rank dimension r"})
    top_mlp: tuple[int, ...] = field(default=(1024, 1024, 512, 256, 1), metadata={
        "min": 1, "max": 1_000_000, "max_items": 64, "doc": "top (over-arch) MLP widths, the last the logit"})
    pipeline: bool = field(default=True, metadata={
        "doc": "TorchRec's train pipeline: the next batch's lookups' all-to-all runs under this batch's "
               "dense layers (Edge.overlap); false = every all-to-all blocks"})

    def table_rows(self, i: int) -> int:
        """Rows of table ``i``."""
        return self.rows[i % len(self.rows)]

    def table_pooling(self, i: int) -> int:
        """Pooling factor of table ``i``."""
        return self.pooling[i % len(self.pooling)]

    @property
    def total_rows(self) -> int:
        """Rows of every table together."""
        return sum(self.table_rows(i) for i in range(self.tables))

    @property
    def layers(self) -> int:
        """The workload's pipeline layers: the embedding layer, the bottom MLP, the interaction
        (its cross layers, or one dot-product layer) and the top MLP."""
        inter = self.cross_layers if self.interaction == "dcn" else 1
        return 1 + len(self.bottom_mlp) + inter + len(self.top_mlp)


def derive(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` (a raw model section of kind dlrm) with its dlrm section checked and the
    transformer fields it derives (DLRM_DERIVED) filled; a given one that disagrees is refused."""
    if model.get("kind") not in (None, "dlrm"):
        raise ScenarioError("model.kind", f"{model['kind']!r} but model.dlrm is set; use dlrm, or remove "
                                          "model.dlrm")
    if model.get("conv") is not None:
        raise ScenarioError("model.conv", "is a convolutional network's section; a dlrm model has none "
                                          "(remove it)")
    raw = model.get("dlrm") or {}
    d = build(Dlrm, raw, "model.dlrm")
    for name, mlp in (("bottom_mlp", d.bottom_mlp), ("top_mlp", d.top_mlp)):
        if not mlp:                 # an empty list has no last layer to check below
            raise ScenarioError(f"model.dlrm.{name}", "is empty; give the layer widths, e.g. [512, 256, 128]")
    if d.bottom_mlp[-1] != d.dim:
        raise ScenarioError("model.dlrm.bottom_mlp", f"ends in {d.bottom_mlp[-1]} but model.dlrm.dim is "
                                                     f"{d.dim}; the interaction needs them equal")
    if d.top_mlp[-1] != 1:
        raise ScenarioError("model.dlrm.top_mlp", f"ends in {d.top_mlp[-1]}; the last layer is the "
                                                  "click logit: end it in 1")
    derived = dict(zip(DLRM_DERIVED, (d.layers, d.dim, 1, 1, d.dim, 1, 1, False, False), strict=True))
    for k, v in derived.items():
        if model.get(k) is not None and model[k] != v:
            raise ScenarioError(f"model.{k}", f"{model[k]!r} does not match model.dlrm (it gives {v!r}); "
                                              "leave it out, it is derived from model.dlrm")
    return {**model, "kind": "dlrm", "dlrm": raw, **derived}


def rule_dlrm(sc: Any) -> None:
    """A recommendation model (model.dlrm) has no transformer parts, and its layers (embedding
    lookups, MLPs, cross layers: explorer/workloads/dlrm/) are neither recomputed nor run in FP8
    here — refused rather than accepted and ignored."""
    m, tr = sc.model, sc.training
    if getattr(m, "dlrm", None) is None:
        return
    # Its tables are sharded over the data-parallel GPUs and its MLPs replicated: no transformer
    # degree applies (tp had read "does not divide model.heads=1", token slices "seq_len/cp = 1/1").
    trains = ("a recommendation model (model.dlrm) trains data-parallel here, its tables sharded over "
              "those GPUs")
    p = sc.parallelism
    for dim in ("tp", "cp", "ep", "pp", "token_slices"):
        if getattr(p, dim) != 1:
            raise ScenarioError(f"parallelism.{dim}", f"{getattr(p, dim)}: {trains}; set it to 1")
    why = "a recommendation model (model.dlrm) has no such part here"
    refuse_parts(m, ("moe", "mla", "mtp_depth", "conv"), f"is not a DLRM part; {why} (remove it)")
    d = m.dlrm
    if d.sharding == "column_wise" and d.dim < sc.dp:
        raise ScenarioError("model.dlrm.sharding", f"'column_wise' cuts each table's {d.dim} columns over "
                                                   f"{sc.dp} GPUs: fewer columns than GPUs; use another "
                                                   f"sharding, or model.dlrm.dim of at least {sc.dp}")
    if tr.recompute != "none":
        raise ScenarioError("training.recompute", f"{tr.recompute!r}: recomputing a DLRM's layers is not "
                                                  "modelled; use none")
    if tr.dtype == "fp8":
        raise ScenarioError("training.dtype", "'fp8': a DLRM's MLPs are priced in bf16, fp16 or fp32 "
                                              "here; use one of them")

