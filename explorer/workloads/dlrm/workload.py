"""The recommendation family as the registry sees it (explorer/workloads/registry.py): a scenario
whose model has a ``dlrm`` section (or ``model.kind: dlrm``).  One layer kind per layer (the
embedding layer, each MLP layer, each cross layer: costs.py), data parallelism for the dense layers
and the ``emb`` dimension for the tables' exchange (its group the data-parallel one:
explorer/dimensions.py); no tensor, context, expert or pipeline parallelism, no gradient
compression.  Samples per second as the unit of throughput (MLPerf's DLRM-DCNv2 reports samples).

Not priced by the estimator's arrays (``estimator=False`` in the registry): its layers differ one
by one and carry generic edges, which the array routes do not read; its rows are simulated (the
task fold or the full simulation: explorer/fold/run.py).
"""
from __future__ import annotations

from ...config import Model, Scenario
from ...config.dlrm import SHARDINGS
from ..family import Nouns
from ..spec import WorkloadSpec
from . import costs

# What a layout search varies (explorer/design/space.py): every TorchRec sharding plan, and the
# threshold below which tables are replicated instead (0: none; TorchRec's and HugeCTR's planners
# replicate small tables, whose all-reduce costs less than an exchange).
SEARCH_AXES = (("model.dlrm.sharding", SHARDINGS), ("model.dlrm.dp_max_rows", (0, 100_000, 1_000_000)))


def recognises(m: Model) -> bool:
    """A model with a ``dlrm`` section (model.dlrm) is a recommendation model."""
    return getattr(m, "dlrm", None) is not None


def spec(sc: Scenario) -> WorkloadSpec:
    """One kind per layer, each a run of one, in forward order, and the two edges.  The tables are
    sharded over the data-parallel group (every GPU: tp = cp = ep = pp = 1)."""
    layers = costs.layer_costs(sc, sc.dp)
    return WorkloadSpec(layers, tuple((i, 1) for i in range(len(layers))), costs.input_cost(sc),
                        costs.loss_cost(sc), distinct_layers=True)


def params(sc: Scenario) -> float:
    """Every trainable parameter, tables included (MLPerf DLRM-DCNv2: 204.2M rows x 128)."""
    assert sc.model.dlrm is not None
    return costs.params(sc.model.dlrm)


def nouns(m: Model) -> Nouns:
    """Samples per second; layers are the embedding layer, MLP and interaction layers."""
    return Nouns("samples", "samples", "layers of a recommendation model (embedding, MLPs, interaction)",
                 "dense input", "loss")


def caption(m: Model) -> str:
    """What the sidebar says in place of the transformer fields."""
    d = m.dlrm
    assert d is not None
    inter = f"{d.cross_layers} DCNv2 cross layers" if d.interaction == "dcn" else "dot interaction"
    return (f"A recommendation model: {d.tables} embedding tables ({d.total_rows:,} rows x {d.dim}), "
            f"{d.sharding.replace('_', '-')} sharded over every GPU, {inter}; the batch counts samples. "
            "Trains data-parallel with an embedding all-to-all (tp, cp, ep, pp 1).")


CONTROLS = (
    ("model.dlrm.tables", "Embedding tables", "int"),
    ("model.dlrm.rows", "Rows per table (table i: item i mod n)", "list"),
    ("model.dlrm.pooling", "Lookups per sample per table (pooling)", "list"),
    ("model.dlrm.dim", "Embedding dimension", "int"),
    ("model.dlrm.table_dtype", "Table precision", "choice"),
    ("model.dlrm.sharding", "Table sharding (TorchRec)", "choice"),
    ("model.dlrm.dp_max_rows", "Replicate tables up to N rows (0 = none)", "int"),
    ("model.dlrm.pipeline", "Pipeline the embedding all-to-all", "bool"),
    ("model.dlrm.hot_share", "Lookups served from cache (skew)", "float"),
    ("model.dlrm.dense_features", "Dense features", "int"),
    ("model.dlrm.bottom_mlp", "Bottom MLP widths (last = dimension)", "list"),
    ("model.dlrm.interaction", "Interaction (DCNv2 cross or dot)", "choice"),
    ("model.dlrm.cross_layers", "DCNv2 cross layers", "int"),
    ("model.dlrm.cross_rank", "DCNv2 low rank", "int"),
    ("model.dlrm.top_mlp", "Top MLP widths (last = 1)", "list"),
)
