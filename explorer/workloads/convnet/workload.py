"""The convolutional family as the registry sees it (explorer/workloads/registry.py): a scenario
whose model has a ``conv`` section; every residual block its own layer kind (blocks.py), the stem
before the first and the classifier after the last; data parallelism only
(explorer/config/rules.rule_conv_trains_data_parallel says so at load); the PowerSGD factor of
its kernels reshaped to matrices; images or clips as the unit of throughput.
"""
from __future__ import annotations

from ...config import Model, Scenario
from ..family import Nouns
from ..spec import WorkloadSpec
from .blocks import block_costs, head_cost, network, stem_cost


def recognises(m: Model) -> bool:
    """A model with a ``conv`` section (model.conv) is a residual convolutional network."""
    return m.conv is not None


def spec(sc: Scenario) -> WorkloadSpec:
    """One kind per block, each block a run of one, in forward order; the stem and the head."""
    blocks = block_costs(sc)
    return WorkloadSpec(blocks, tuple((i, 1) for i in range(len(blocks))), stem_cost(sc), head_cost(sc),
                        distinct_layers=True)


def params(sc: Scenario) -> float:
    """Every trainable parameter (ResNet-50: 25,557,032, torchvision's count)."""
    return float(network(sc.model.conv).params)


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """(P + Q elements + uncompressed vectors) / (gradient elements): each kernel reshaped to a
    C_out x (C_in x kernel volume) matrix (Vogels et al., PowerSGD, NeurIPS 2019, Sec. 3) sends
    min(r (m + n), m n) elements; the batch-norm vectors and biases are sent as they are (PowerSGD
    all-reduces rank-1 tensors uncompressed).  ``tp`` is 1 (data parallelism only)."""
    net = network(m.conv)
    mats = sum(min(rank * (a + b), a * b) for a, b in net.matrices)
    return min(1.0, (mats + net.params - sum(a * b for a, b in net.matrices)) / net.params)


def nouns(m: Model) -> Nouns:
    """Images (clips for a video model) per second, one per sample; layers are residual blocks."""
    assert m.conv is not None                     # this family is chosen by its conv section
    unit = "clips" if m.conv.frames > 1 else "images"
    return Nouns(unit, unit, f"residual blocks of a {m.conv.label}", "stem", "classifier")


def caption(m: Model) -> str:
    """What the transformer fields the loader derived are for this network."""
    assert m.conv is not None
    return (f"A {m.conv.label}: {m.layers} residual blocks, {m.hidden} channels into a "
            f"{m.vocab}-class classifier; the batch counts {nouns(m).sample}. Trains data-parallel "
            "(tp, pp, cp, ep 1).")


CONTROLS = (
    ("model.conv.depth", "ResNet depth", "choice"),
    ("model.conv.image_size", "Image size (pixels)", "int"),
    ("model.conv.frames", "Frames per clip (1 = images)", "int"),
    ("model.conv.classes", "Classes", "int"),
)
