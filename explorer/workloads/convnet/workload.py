"""The convolutional family as the registry sees it (explorer/workloads/registry.py): a scenario
whose model has a ``conv`` section (or ``model.kind: cnn``).  A ResNet: every residual block its
own layer kind (blocks.py), the stem before the first and the classifier after the last.  A VGG
(vgg.py, vgg_costs.py): every convolution and fully connected layer its own layer kind, the image
cast before the first and the loss after the last.  Data and pipeline parallelism (the layers
differ one by one, so the stage split balances their real costs and each stage sends its last
layer's output: LayerCost.out_bytes); the PowerSGD factor of its kernels reshaped to matrices;
images or clips as the unit of throughput.
"""
from __future__ import annotations

from ...config import Model, Scenario
from ..family import Nouns
from ..spec import WorkloadSpec
from . import vgg_costs
from .blocks import block_costs, head_cost, network, stem_cost


def recognises(m: Model) -> bool:
    """A model with a ``conv`` section (model.conv) is a convolutional network."""
    return m.conv is not None


def spec(sc: Scenario) -> WorkloadSpec:
    """One kind per layer (block), each a run of one, in forward order, and the two edges."""
    assert sc.model.conv is not None
    if sc.model.conv.vgg:
        layers = vgg_costs.layer_costs(sc)
        first, last = vgg_costs.input_cost(sc), vgg_costs.loss_cost(sc)
    else:
        layers = block_costs(sc)
        first, last = stem_cost(sc), head_cost(sc)
    return WorkloadSpec(layers, tuple((i, 1) for i in range(len(layers))), first, last,
                        distinct_layers=True)


def _table(m: Model):
    assert m.conv is not None                     # this family is chosen by its conv section
    return vgg_costs.network(m.conv) if m.conv.vgg else network(m.conv)


def params(sc: Scenario) -> float:
    """Every trainable parameter (ResNet-50: 25,557,032; VGG-16: 138,357,544, torchvision's)."""
    return float(_table(sc.model).params)


def powersgd_factor(m: Model, tp: int, rank: int) -> float:
    """(P + Q elements + uncompressed vectors) / (gradient elements): each kernel reshaped to a
    C_out x (C_in x kernel volume) matrix (Vogels et al., PowerSGD, NeurIPS 2019, Sec. 3) sends
    min(r (m + n), m n) elements; the batch-norm vectors and biases are sent as they are (PowerSGD
    all-reduces rank-1 tensors uncompressed).  ``tp`` is 1 (no tensor parallelism)."""
    net = _table(m)
    mats = sum(min(rank * (a + b), a * b) for a, b in net.matrices)
    return min(1.0, (mats + net.params - sum(a * b for a, b in net.matrices)) / net.params)


def nouns(m: Model) -> Nouns:
    """Images (clips for a video model) per second, one per sample; layers are residual blocks
    (a VGG's convolutions and fully connected layers)."""
    assert m.conv is not None                     # this family is chosen by its conv section
    unit = "clips" if m.conv.frames > 1 else "images"
    if m.conv.vgg:
        return Nouns(unit, unit, f"weight layers of a {m.conv.label}", "input", "loss")
    return Nouns(unit, unit, f"residual blocks of a {m.conv.label}", "stem", "classifier")


def caption(m: Model) -> str:
    """What the transformer fields the loader derived are for this network."""
    assert m.conv is not None
    what = "weight layers" if m.conv.vgg else "residual blocks"
    return (f"A {m.conv.label}: {m.layers} {what}, {m.hidden} channels into a "
            f"{m.vocab}-class classifier; the batch counts {nouns(m).sample}. Trains data- and "
            "pipeline-parallel (tp, cp, ep 1).")


CONTROLS = (
    ("model.conv.depth", "Depth (ResNet 18-152, VGG 11-19)", "choice"),
    ("model.conv.image_size", "Image size (pixels)", "int"),
    ("model.conv.frames", "Frames per clip (1 = images)", "int"),
    ("model.conv.classes", "Classes", "int"),
)
