"""The layer table of a residual convolutional network: every convolution of ResNet-18 to -152 for
images, and of the SlowOnly 3D ResNet for video clips, with its channels, kernel, stride and the
size of the feature map it produces.  Pure arithmetic on the architecture (no costs: those are in
:mod:`explorer.workloads.convnet.blocks`).

Sources:
- He et al., "Deep Residual Learning for Image Recognition", CVPR 2016 (arXiv 1512.03385),
  Table 1: the stem (7x7/2 convolution, 3x3/2 max pool), four stages of basic blocks (two 3x3
  convolutions; ResNet-18/34) or bottleneck blocks (1x1, 3x3, 1x1 with 4x expansion; ResNet-50/
  101/152), a projection shortcut (1x1 convolution) where the shape changes, global average
  pooling and a fully connected classifier.  Blocks per stage: 18 (2,2,2,2), 34 and 50 (3,4,6,3),
  101 (3,4,23,3), 152 (3,8,36,3).
- ResNet v1.5 (torchvision's ``resnet50`` and NVIDIA's DeepLearningExamples): the stride-2 of a
  downsampling bottleneck sits in its 3x3 convolution, not in the first 1x1.
- Feichtenhofer et al., "SlowFast Networks for Video Recognition", ICCV 2019 (arXiv 1812.03982),
  Table 1, the Slow pathway used alone ("SlowOnly"): the same ResNet with every feature map
  ``frames`` deep (no temporal striding), the stem 1x7x7, and the first 1x1 convolution of every
  bottleneck in res4 and res5 inflated to 3x1x1 (temporal kernel 3).
Every convolution is followed by batch normalisation (a scale and a shift per channel) and,
except the last one of a block and the shortcut projection, a ReLU.
"""
from __future__ import annotations

from dataclasses import dataclass

# He et al. Table 1 and Sec. 4.1 (blocks per stage, bottleneck expansion): the scenario's Conv
# section validates depths against the same table and derives its block count from it.
from ...config.model_parts import BOTTLENECK_EXPANSION, BOTTLENECK_FROM_DEPTH, STAGE_BLOCKS

DEPTHS = tuple(STAGE_BLOCKS)
SLOWONLY_TEMPORAL_STAGES = (2, 3)  # res4 and res5 (stage 0 is res2): conv1 is 3x1x1
TEMPORAL_KERNEL = 3


@dataclass(frozen=True)
class ConvLayer:
    """One convolution on one sample: ``c_in`` -> ``c_out`` channels with a ``kt`` x ``k`` x ``k``
    kernel, producing a ``frames`` x ``size`` x ``size`` feature map from a ``size_in`` one."""

    name: str
    c_in: int
    c_out: int
    k: int
    kt: int
    size_in: int
    size: int
    frames: int
    relu: bool                       # followed by BN + ReLU (else BN alone: block end, shortcut)

    @property
    def positions(self) -> int:
        """Output positions per sample (frames x height x width): the implicit GEMM's rows."""
        return self.frames * self.size * self.size

    @property
    def reduction(self) -> int:
        """The implicit GEMM's inner dimension: input channels x kernel volume."""
        return self.c_in * self.k * self.k * self.kt

    @property
    def weights(self) -> int:
        """Kernel parameters (no bias: a batch norm follows)."""
        return self.c_out * self.reduction

    @property
    def out_elements(self) -> int:
        """Elements of the output feature map per sample."""
        return self.c_out * self.positions


@dataclass(frozen=True)
class Block:
    """One residual block: its convolutions in execution order (the shortcut projection last),
    and the block's input and output feature maps (channels, size)."""

    stage: int
    convs: tuple[ConvLayer, ...]
    c_in: int
    c_out: int
    size_in: int
    size: int
    frames: int

    @property
    def projection(self) -> bool:
        """Whether the shortcut is a 1x1 projection (the shape changes) instead of the identity."""
        return self.convs[-1].name.endswith("proj")

    @property
    def params(self) -> int:
        """Convolution weights and the batch norms' scale and shift (2 per output channel)."""
        return sum(c.weights + 2 * c.c_out for c in self.convs)


@dataclass(frozen=True)
class ConvNet:
    """The whole network for one sample: stem convolution, blocks, classifier."""

    depth: int
    image_size: int
    frames: int
    width: int
    classes: int
    stem: ConvLayer
    pool_size: int                   # feature map after the stem's 3x3/2 max pool
    blocks: tuple[Block, ...]

    @property
    def features(self) -> int:
        """Channels of the last feature map: the classifier's input width."""
        return self.blocks[-1].c_out

    @property
    def head_params(self) -> int:
        """The fully connected classifier: weights and biases."""
        return self.features * self.classes + self.classes

    @property
    def stem_params(self) -> int:
        """The stem convolution and its batch norm."""
        return self.stem.weights + 2 * self.stem.c_out

    @property
    def params(self) -> int:
        """Every trainable parameter (ResNet-50: 25,557,032, torchvision's count)."""
        return self.stem_params + sum(b.params for b in self.blocks) + self.head_params

    @property
    def matrices(self) -> tuple[tuple[int, int], ...]:
        """Every weight as a matrix (rows, columns): a convolution's kernel reshaped to C_out x
        (C_in x kernel volume), as PowerSGD compresses it (Vogels et al., NeurIPS 2019, Sec. 3),
        and the classifier's weights; biases and batch-norm vectors are not matrices."""
        convs = [self.stem, *(c for b in self.blocks for c in b.convs)]
        return tuple((c.c_out, c.reduction) for c in convs) + ((self.classes, self.features),)

    @property
    def forward_macs(self) -> float:
        """Multiply-accumulates of one sample's forward (convolutions and classifier; ResNet-50 at
        224: 4.09e9, the "3.8-4.1 GFLOPs" of He et al. Table 1, which counts multiply-adds)."""
        convs = [self.stem, *(c for b in self.blocks for c in b.convs)]
        return float(sum(c.positions * c.c_out * c.reduction for c in convs) + self.features * self.classes)


def _out(size: int, stride: int) -> int:
    """Spatial size after a padded convolution or pool of ``stride`` (ceil, as 'same' padding)."""
    return -(-size // stride)


def build(depth: int, image_size: int = 224, frames: int = 1, width: int = 64,
          classes: int = 1000) -> ConvNet:
    """The layer table of a ResNet of ``depth`` (one of DEPTHS) on ``image_size`` images, or on
    clips of ``frames`` frames (SlowOnly, frames > 1); ``width`` is the first stage's width."""
    if depth not in STAGE_BLOCKS:
        raise ValueError(f"ResNet depth {depth} unknown; one of {DEPTHS}")
    video = frames > 1
    bottleneck = depth >= BOTTLENECK_FROM_DEPTH
    s1 = _out(image_size, 2)
    stem = ConvLayer("stem", 3, width, 7, 1, image_size, s1, frames, True)
    size = _out(s1, 2)                                       # 3x3/2 max pool
    pool = size
    c_in = width
    blocks: list[Block] = []
    for stage, n in enumerate(STAGE_BLOCKS[depth]):
        mid = width * 2 ** stage
        c_out = mid * BOTTLENECK_EXPANSION if bottleneck else mid
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            out = _out(size, stride)
            tag = f"res{stage + 2}.{i + 1}"
            if bottleneck:
                kt = TEMPORAL_KERNEL if video and stage in SLOWONLY_TEMPORAL_STAGES else 1
                convs = [ConvLayer(f"{tag}.conv1", c_in, mid, 1, kt, size, size, frames, True),
                         ConvLayer(f"{tag}.conv2", mid, mid, 3, 1, size, out, frames, True),
                         ConvLayer(f"{tag}.conv3", mid, c_out, 1, 1, out, out, frames, False)]
            else:
                convs = [ConvLayer(f"{tag}.conv1", c_in, mid, 3, 1, size, out, frames, True),
                         ConvLayer(f"{tag}.conv2", mid, mid, 3, 1, out, out, frames, False)]
            if stride != 1 or c_in != c_out:
                convs.append(ConvLayer(f"{tag}.proj", c_in, c_out, 1, 1, size, out, frames, False))
            blocks.append(Block(stage, tuple(convs), c_in, c_out, size, out, frames))
            c_in, size = c_out, out
    return ConvNet(depth, image_size, frames, width, classes, stem, pool, tuple(blocks))
