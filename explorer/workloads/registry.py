"""The workload registry: one frozen :class:`~explorer.workloads.family.Workload` per family.

Everything outside explorer/workloads/ asks this registry about a scenario's model — its
:class:`~explorer.workloads.spec.WorkloadSpec` (:func:`workload_spec`), whether the estimator
prices it, which communication dimensions it uses, what the pages call its units, its sidebar
controls — instead of testing the model type.  Adding a family = one package under
explorer/workloads/ (its layer costs and a ``workload`` module of the record's functions) plus one
entry in ``WORKLOADS`` below.  A scenario selects a family by its model section: the first
family that recognises the model, the default (the transformer) for what none does.
"""
from __future__ import annotations

from ..config import Model, Scenario, ScenarioError
from ..config.compression import Compression
from ..network import compression
from ..physics.hardware import weight_bytes
from .convnet import workload as convnet
from .dlrm import workload as dlrm
from .family import DEGREES, Attention, Nouns, Workload
from .freezing import frozen_spec
from .gnn import workload as gnn
from .rnn import workload as rnn
from .spec import WorkloadSpec
from .transformer import workload as transformer
from .transformer.attention import attention_block, attention_params, head_dims
from .transformer.moe_load import routed_copy_load

DEFAULT = "transformer"


def _default(m: Model) -> bool:
    return True          # the default family: any model no other family recognises


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("transformer", _default, transformer.spec, transformer.model_params, transformer.nouns,
             ("tp", "cp", "ep", "pp", "dp"), estimator=True, powersgd_factor=transformer.powersgd_factor,
             controls=transformer.CONTROLS,
             attention=Attention(attention_block, attention_params, head_dims),
             summary="A transformer: attention and MLP (or mixture-of-experts) layers over token sequences.",
             citation="Vaswani et al. 2017; Narayanan et al., SC21 (arXiv 2104.04473)"),
    # Its blocks differ one by one: the estimator's two layer kinds do not describe it.  Pipeline
    # stages send their last layer's output (LayerCost.out_bytes: PipeDream, SOSP 2019, Sec. 3.1).
    Workload("convnet", convnet.recognises, convnet.spec, convnet.params, convnet.nouns, ("pp", "dp"),
             estimator=False, powersgd_factor=convnet.powersgd_factor, controls=convnet.CONTROLS,
             caption=convnet.caption,
             summary="A convolutional network (ResNet, VGG): its layers, channels and classes follow "
                     "from its depth.",
             citation="He et al., CVPR 2016; Feichtenhofer et al., SlowFast, ICCV 2019; Simonyan & "
                      "Zisserman, ICLR 2015; Narayanan et al., PipeDream, SOSP 2019"),
    # Tables sharded over every GPU and exchanged on emb (generic edges, taskgraph/edges.py), which
    # the estimator's arrays do not read: its rows are simulated.
    Workload("dlrm", dlrm.recognises, dlrm.spec, dlrm.params, dlrm.nouns, ("dp", "emb"), estimator=False,
             powersgd_factor=None, controls=dlrm.CONTROLS, caption=dlrm.caption,
             summary="A recommendation model (DLRM, DCNv2): embedding tables sharded over the GPUs with "
                     "an all-to-all, dense MLPs data parallel.",
             search_axes=dlrm.SEARCH_AXES, search_fixed=(("recompute", "none"), ("sequence_parallel", False)),
             whole_batch=True,
             citation="Naumov et al., arXiv 1906.00091; Wang et al., DCN V2, WWW 2021; Ivchenko et al., "
                      "TorchRec, RecSys 2022; MLPerf Training DLRM-DCNv2"),
    # GraphSAGE over graph partitions = the dp replicas; its own traffic on the gnn dimension.
    Workload("gnn", gnn.recognises, gnn.spec, gnn.params, gnn.nouns, ("dp", "gnn"), estimator=False,
             powersgd_factor=None, controls=gnn.CONTROLS, caption=gnn.caption,
             samples_per_epoch=gnn.samples_per_epoch,
             host_input=gnn.host_input,
             search_fixed=(("recompute", "none"), ("sequence_parallel", False)), whole_batch=True,
             summary="A graph neural network (GraphSAGE): mini-batch with sampled neighbours and remote "
                     "feature fetch, or full graph with per-layer halo exchange.",
             citation="Hamilton et al., NeurIPS 2017; Zheng et al., DistDGL, arXiv 2010.05337; Wan et al., "
                      "PipeGCN, ICLR 2022"),
    # GNMT's LSTM layers differ one by one (bidirectional, 2h inputs, attention): simulated rows;
    # pipeline stages send their last layer's output (LayerCost.out_bytes), as PipeDream's do.
    Workload("rnn", rnn.recognises, rnn.spec, rnn.params, rnn.nouns, ("pp", "dp"), estimator=False,
             powersgd_factor=rnn.powersgd_factor, controls=rnn.CONTROLS, caption=rnn.caption,
             summary="A recurrent translation model (GNMT): LSTM encoder and decoder with attention, "
                     "pipelined or data parallel.",
             citation="Wu et al., GNMT, arXiv 1609.08144; Narayanan et al., PipeDream, SOSP 2019"),
)}


def get(name: str) -> Workload:
    """The registered family called ``name`` (ValueError listing the known ones otherwise)."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload family {name!r}; known: {', '.join(WORKLOADS)}") from None


def names() -> tuple[str, ...]:
    """Every registered family, in registry order (the order the sidebar lists their controls)."""
    return tuple(WORKLOADS)


def workload_for(m: Model) -> Workload:
    """The family of model section ``m``: the first non-default family that recognises it, else
    the default."""
    for w in WORKLOADS.values():
        if w.name != DEFAULT and w.recognises(m):
            return w
    return WORKLOADS[DEFAULT]


def problem(sc: Scenario, w: Workload | None = None) -> tuple[str, str] | None:
    """(field, message) when ``sc`` asks its family for what it does not model — a parallel
    dimension it does not use, gradient compression it has no factor for — else None.  The
    config rules refuse these at load for the shipped families; this is the net for a new one."""
    w = w or workload_for(sc.model)
    if w.models_everything:
        return None
    par = sc.parallelism
    for dim in DEGREES:
        n = getattr(par, dim)
        if n > 1 and dim not in w.dimensions:
            return (f"parallelism.{dim}", f"{n}: the {w.name} workload has no {dim} dimension (it "
                                          f"communicates over {', '.join(w.dimensions)}); set it to 1")
    comp = sc.communication.compression
    if comp.active and not w.compression:
        return ("communication.compression.kind", f"{comp.kind}: gradient compression is not modelled "
                                                  f"for the {w.name} workload; use none")
    return None


def workload_spec(sc: Scenario) -> WorkloadSpec:
    """What one GPU of ``sc`` computes, keeps and communicates per pipeline unit (its family's
    spec); a ScenarioError naming the field when the family does not model what ``sc`` asks."""
    w = workload_for(sc.model)
    bad = problem(sc, w)
    if bad is not None:
        raise ScenarioError(*bad)
    spec = w.spec(sc)
    n = sc.training.frozen_layers
    if n and n >= spec.layers:
        raise ScenarioError("training.frozen_layers", f"{n} freezes all {spec.layers} layers: nothing "
                            f"would train; freeze at most {spec.layers - 1}")
    return frozen_spec(spec, n, bool(getattr(sc.model, "tied_embeddings", False)),
                       weight_bytes(sc.training.dtype))


def attention_of(m: Model) -> Attention:
    """The attention of ``m``'s family as serving prices it; a ScenarioError naming model.kind for
    a family that is not served (explorer/serving models transformer inference)."""
    att = workload_for(m).attention
    if att is None:
        raise ScenarioError("model.kind", f"{workload_for(m).name}: serving (inference:) models a "
                                          "transformer's prefill and decode; choose a transformer model")
    return att


def expert_load(m: Model, ep: int) -> float:
    """The busiest of ``ep`` expert ranks' routed load over the mean: the routing skew's share
    (transformer/moe_load.py) times ``model.moe.imbalance``; 1 without routed experts or EP."""
    return routed_copy_load(m.moe, ep)


def nouns(m: Model) -> Nouns:
    """What the pages call the units of ``m``'s family (tokens/s, sequences, layers)."""
    return workload_for(m).nouns(m)


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """PowerSGD's (P + Q elements) / (gradient elements) for ``m``'s weight matrices cut by ``tp``
    at ``rank`` (its family's factor; ScenarioError when the family has none)."""
    w = workload_for(m)
    if w.powersgd_factor is None:
        raise ScenarioError("communication.compression.kind", f"powersgd: gradient compression is not "
                                                              f"modelled for the {w.name} workload; use none")
    return w.powersgd_factor(m, tp, rank)


def compression_plan(c: Compression, m: Model, tp: int, n: int) -> compression.Plan:
    """The network's plan of compressor ``c`` for a group of ``n`` ranks (network/compression.py),
    with PowerSGD's factor of ``m``'s weight matrices cut by ``tp`` as its family counts them."""
    return compression.plan(c, n, powersgd_factor(m, tp, c.rank) if c.kind == "powersgd" else None)
