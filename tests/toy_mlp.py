"""A toy workload family, written as a new family would be (one module of its own, then one
registry entry): a multi-layer perceptron of ``model.layers`` dense ``hidden x hidden`` layers, each
followed by a ReLU, on samples of one vector (``seq_len`` 1).  tests/test_workload_family.py
registers it and runs it through the simulation and the estimator against closed forms.

Per layer, one micro-batch of b samples, e bytes per element (Goodfellow et al., Deep Learning,
Sec. 6.5, back-propagation through a linear layer): the forward y = relu(x W) is one b x h x h
GEMM, 2 b h^2 FLOPs; the backward computes dX = dY W^T and dW = X^T dY, 2 b h^2 FLOPs each; the
ReLU reads and writes b h elements (its backward twice that); the layer keeps its input x (b h
elements) for the weight gradient; it holds h^2 weights (no bias).  Nothing before the first layer
or after the last is priced (the edges are empty).
"""
from __future__ import annotations

from explorer.physics.hardware import BYTES_PER_ELEMENT
from explorer.physics.work import ZERO_WORK, Gemm, Work
from explorer.scenario import Model, Scenario
from explorer.workloads.family import Nouns, Workload
from explorer.workloads.spec import EdgeCost, LayerCost, WorkloadSpec
from explorer.workloads.timing import BACKWARD_STREAM_FACTOR, GemmTimer

PRESET = "toy-mlp"
# The model preset a scenario selects the family by (the transformer fields the MLP reads: layers
# and hidden; one head and one position make every transformer rule hold).
FIELDS = {"layers": 8, "hidden": 4096, "heads": 1, "seq_len": 1, "vocab": 1, "dropout": False}
RELU_PASSES = 2                      # read + write


def recognises(m: Model) -> bool:
    """A model started from the toy preset."""
    return m.preset == PRESET


def spec(sc: Scenario) -> WorkloadSpec:
    """One layer kind, ``model.layers`` of it; empty edges (module docstring)."""
    m, b = sc.model, sc.training.micro_batch
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    fwd, dgrad, wgrad, _, _ = GemmTimer(sc).passes([Gemm(b, m.hidden, m.hidden, fp8=False)])
    relu = RELU_PASSES * b * m.hidden * e
    back = BACKWARD_STREAM_FACTOR * relu
    layer = LayerCost(fwd + Work(0.0, 0.0, relu), dgrad + Work(0.0, 0.0, back), wgrad,
                      recompute=ZERO_WORK, attn_core_fwd=ZERO_WORK, expert_fwd=ZERO_WORK,
                      params=float(m.hidden * m.hidden), expert_params=0.0, act_bytes=float(b * m.hidden * e),
                      tp_fwd=(), tp_bwd=(), tp_recompute=(), ep_fwd=(), ep_bwd=(), cp_kv_bytes=0.0)
    edge = EdgeCost(ZERO_WORK, ZERO_WORK, ZERO_WORK, 0.0, 0.0)
    return WorkloadSpec((layer,), ((0, m.layers),), edge, edge)


def params(sc: Scenario) -> float:
    """L h^2 weights."""
    return float(sc.model.layers * sc.model.hidden ** 2)


def nouns(m: Model) -> Nouns:
    return Nouns("samples", "samples", "dense layers of a toy MLP", "input", "output")


# The one registry entry: data and pipeline parallelism, priced by the estimator, no compression.
WORKLOAD = Workload("toy-mlp", recognises, spec, params, nouns, ("pp", "dp"), estimator=True,
                    powersgd_factor=None, summary="A toy MLP of dense layers.")
