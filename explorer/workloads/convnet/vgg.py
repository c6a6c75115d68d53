"""The layer table of a VGG network (Simonyan & Zisserman, "Very Deep Convolutional Networks for
Large-Scale Image Recognition", ICLR 2015, arXiv 1409.1556): every 3x3 convolution and fully
connected layer with its shape, parameters, multiply-accumulates and the size of its output — what
a pipeline stage that ends with it sends to the next (PipeDream's per-layer profile: Narayanan et
al., SOSP 2019, Sec. 3.1, "the size of the output activations").  Pure arithmetic on the
architecture; the costs are in :mod:`explorer.workloads.convnet.vgg_costs`.

Table 1 of the paper, configuration D (VGG-16): five blocks of 2, 2, 3, 3, 3 convolutions of 64,
128, 256, 512, 512 channels (3x3, stride 1, padding 1, bias, ReLU), each block closed by a 2x2/2
max pool, then FC-4096, FC-4096 (ReLU and dropout each) and FC-1000.  torchvision's ``vgg16``
(the layout PipeDream trained) counts 138,357,544 parameters and 15.47 GMACs per 224 x 224 image
(its model card's "GFLOPS", which are multiply-accumulates).  Configurations A, B and E (VGG-11,
-13, -19) differ only in the convolutions per block.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config.model_parts import VGG_BLOCK_CONVS, VGG_FC_WIDTH

KERNEL = 3                  # every convolution is 3x3, stride 1, padding 1 (Sec. 2.1)
POOL_STRIDE = 2             # 2x2 max pool, stride 2, after each block (Sec. 2.1)
DROPOUT_FC = 2              # fc6 and fc7 are followed by dropout (Sec. 3.1: ratio 0.5)


@dataclass(frozen=True)
class VggLayer:
    """One weight layer on one sample.  A convolution maps ``c_in`` x ``size`` x ``size`` to
    ``c_out`` x ``size`` x ``size`` (then ``out_size`` after its block's pool, when ``pool``); a
    fully connected layer (``fc``) maps ``c_in`` features to ``c_out`` (size 1)."""

    name: str
    fc: bool
    c_in: int
    c_out: int
    size: int
    pool: bool
    relu: bool
    dropout: bool

    @property
    def out_size(self) -> int:
        """Spatial size of the layer's output (after its pool)."""
        return self.size // POOL_STRIDE if self.pool else self.size

    @property
    def positions(self) -> int:
        """Output positions per sample: the implicit GEMM's rows (1 for a fully connected layer)."""
        return self.size * self.size

    @property
    def reduction(self) -> int:
        """The GEMM's inner dimension: input channels x 3 x 3, or input features."""
        return self.c_in if self.fc else self.c_in * KERNEL * KERNEL

    @property
    def params(self) -> int:
        """Weights and one bias per output channel (no batch norm in VGG)."""
        return self.reduction * self.c_out + self.c_out

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one sample's forward: positions x C_out x reduction."""
        return self.positions * self.c_out * self.reduction

    @property
    def in_elements(self) -> int:
        """Elements of the layer's input per sample."""
        return self.c_in * self.size * self.size

    @property
    def conv_elements(self) -> int:
        """Elements of the GEMM's output (before the pool) per sample."""
        return self.c_out * self.positions

    @property
    def out_elements(self) -> int:
        """Elements of the layer's output per sample: what a stage ending here sends forward."""
        return self.c_out * self.out_size * self.out_size


@dataclass(frozen=True)
class Vgg:
    """The whole network for one sample: its weight layers in order."""

    depth: int
    image_size: int
    classes: int
    layers: tuple[VggLayer, ...]

    @property
    def params(self) -> int:
        """Every trainable parameter (VGG-16 at 1000 classes: 138,357,544, torchvision's count)."""
        return sum(x.params for x in self.layers)

    @property
    def forward_macs(self) -> float:
        """Multiply-accumulates of one sample's forward (VGG-16 at 224: 15.47e9)."""
        return float(sum(x.macs for x in self.layers))

    @property
    def matrices(self) -> tuple[tuple[int, int], ...]:
        """Every weight as a matrix (C_out x reduction), as PowerSGD compresses it (Vogels et al.,
        NeurIPS 2019, Sec. 3); biases are vectors."""
        return tuple((x.c_out, x.reduction) for x in self.layers)


def build(depth: int, image_size: int = 224, width: int = 64, classes: int = 1000) -> Vgg:
    """The layer table of VGG-``depth`` (11, 13, 16, 19) on ``image_size`` images; ``width`` is the
    first block's channels (64; doubled per block up to 8 x width)."""
    if depth not in VGG_BLOCK_CONVS:
        raise ValueError(f"VGG depth {depth} unknown; one of {tuple(VGG_BLOCK_CONVS)}")
    layers: list[VggLayer] = []
    c_in, size = 3, image_size
    for block, n in enumerate(VGG_BLOCK_CONVS[depth]):
        c_out = width * 2 ** min(block, 3)
        for i in range(n):
            last = i == n - 1
            layers.append(VggLayer(f"conv{block + 1}_{i + 1}", False, c_in, c_out, size, last, True, False))
            c_in = c_out
        size //= POOL_STRIDE
    widths = (c_in * size * size, VGG_FC_WIDTH, VGG_FC_WIDTH, classes)
    for i in range(3):
        hidden = i < DROPOUT_FC
        layers.append(VggLayer(f"fc{i + 6}", True, widths[i], widths[i + 1], 1, False, hidden, hidden))
    return Vgg(depth, image_size, classes, tuple(layers))
