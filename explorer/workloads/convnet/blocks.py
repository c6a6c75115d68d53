"""What one GPU computes and keeps for each residual block of a convolutional network, one
micro-batch at a time: the :class:`~explorer.workloads.spec.LayerCost` every workload fills, so that
the task graph, buckets, memory and timeline treat a ResNet block as a layer.

- Convolutions run as implicit GEMMs (cuDNN's IMPLICIT_GEMM / implicit-precomp algorithms,
  Chetlur et al., "cuDNN: Efficient Primitives for Deep Learning", arXiv 1410.0759, Sec. 3):
  rows = samples x output positions, columns = output channels, inner dimension = input channels
  x kernel volume, timed by their shape like every GEMM (explorer/physics/kernels.py).  The data gradient
  is the same GEMM transposed and the weight gradient reduces over the rows (2 x the forward's
  FLOPs in backward, as for a linear layer).  The stem's data gradient is not computed (the
  input image needs none: PyTorch's autograd skips it).
- Batch normalisation, ReLU, the residual add and the pools are element-wise HBM passes (eager
  PyTorch runs each as its own kernel): BN forward reads its input for the statistics, then
  reads it and writes its output (3 passes); ReLU in place 2; the add 3 (two reads, one write);
  the max pool reads its input and writes its output plus int64 indices; backward passes are
  twice the forward's (explorer/workloads/timing.BACKWARD_STREAM_FACTOR).
- Activations kept for the backward (PyTorch autograd): each convolution's input, each batch
  norm's input (the convolution's output) and each ReLU's output (which is also the next
  convolution's input, counted once); the block's output is the next block's input.
- Communication: data and pipeline parallelism (config rule_conv_trains_data_parallel), so a block
  makes no TP/CP/EP calls; its gradients go to the DP buckets, which become ready in backward order
  of the real per-block parameter counts (ChunkWork.grad_curve); a pipeline stage ending with it
  sends its output feature map (``out_bytes``).
"""
from __future__ import annotations

from functools import lru_cache

from ...config import Scenario
from ...config.model_parts import Conv
from ...physics.hardware import BYTES_PER_ELEMENT
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import EdgeCost, LayerCost
from ..timing import BACKWARD_STREAM_FACTOR, GemmTimer
from . import arch as convnet_arch

BN_PASSES = 3          # batch norm forward: statistics read, then read + write
RELU_PASSES = 2        # in-place ReLU: read + write
ADD_PASSES = 3         # residual add: two reads, one write
POOL_INDEX_BYTES = 8   # max_pool2d_with_indices keeps an int64 index per output element
LOSS_PASSES = 3        # fp32 logits: write, max/sum read, read (the softmax cross-entropy)


@lru_cache(maxsize=64)
def network(conv: Conv) -> convnet_arch.ConvNet:
    """The layer table of ``conv`` (cached: a scenario's blocks are priced many times)."""
    return convnet_arch.build(conv.depth, conv.image_size, conv.frames, conv.width, conv.classes)


def _gemm(c: convnet_arch.ConvLayer, samples: float) -> Gemm:
    """The implicit GEMM of convolution ``c`` over ``samples`` samples (never an FP8 recipe)."""
    return Gemm(samples * c.positions, c.c_out, c.reduction, fp8=False)


def _element_bytes(sc: Scenario) -> int:
    """Bytes per activation element: fp16/bf16 under mixed precision, 4 in fp32 (TF32 math)."""
    return BYTES_PER_ELEMENT[sc.training.dtype]


def block_costs(sc: Scenario) -> tuple[LayerCost, ...]:
    """Every residual block's cost for one micro-batch on one GPU, in forward order."""
    net = network(sc.model.conv)
    timer = GemmTimer(sc)
    e = _element_bytes(sc)
    b = sc.training.micro_batch
    out = []
    for blk in net.blocks:
        fwd, dgrad, wgrad, _, _ = timer.passes([_gemm(c, b) for c in blk.convs])
        passes = 0.0                         # element-wise passes over output elements, forward
        kept = 0.0                           # activation elements kept
        for c in blk.convs:
            n = c.out_elements
            if c.relu:                       # BN + ReLU; keeps the BN input and the ReLU output
                passes += (BN_PASSES + RELU_PASSES) * n
                kept += 2 * n
            else:                            # BN alone (block end, projection); keeps the BN input
                passes += BN_PASSES * n
                kept += n
        y = blk.c_out * blk.frames * blk.size * blk.size
        passes += (ADD_PASSES + RELU_PASSES) * y       # add the shortcut, ReLU; keeps the output
        kept += y
        stream = b * passes * e
        params = float(blk.params)
        out.append(LayerCost(
            fwd=fwd + Work(0.0, 0.0, stream),
            bwd_input=dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * stream),
            bwd_weight=wgrad, recompute=ZERO_WORK, attn_core_fwd=ZERO_WORK, expert_fwd=ZERO_WORK,
            params=params, expert_params=0.0, act_bytes=b * kept * e,
            tp_fwd=(), tp_bwd=(), tp_recompute=(), ep_fwd=(), ep_bwd=(), cp_kv_bytes=0.0,
            out_bytes=float(b * y * e)))          # the block's output: what a stage ending here sends
    return tuple(out)


def stem_cost(sc: Scenario) -> EdgeCost:
    """The stem on the first chunk: the 7x7/2 convolution (weight gradient only in backward), its
    BN + ReLU and the 3x3/2 max pool; keeps the input cast to the compute dtype, the BN input,
    the ReLU output, the pool's indices and its output (the first block's input)."""
    net = network(sc.model.conv)
    timer = GemmTimer(sc)
    e = _element_bytes(sc)
    b = sc.training.micro_batch
    c = net.stem
    fwd, _, wgrad, _, _ = timer.passes([_gemm(c, b)])
    pooled = c.c_out * net.frames * net.pool_size ** 2
    image = 3 * net.frames * net.image_size ** 2
    passes = (BN_PASSES + RELU_PASSES + 1) * c.out_elements + pooled      # + the pool's read and write
    stream = b * (passes * e + pooled * POOL_INDEX_BYTES + image * (4 + e))   # fp32 image cast
    kept = b * ((2 * c.out_elements + image + pooled) * e + pooled * POOL_INDEX_BYTES)
    return EdgeCost(fwd + Work(0.0, 0.0, stream), Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * b * passes * e),
                    wgrad, float(net.stem_params), kept)


def head_cost(sc: Scenario) -> EdgeCost:
    """The classifier on the last chunk: global average pool, the fully connected layer (bf16/fp16
    GEMM with its bias) and the fp32 softmax cross-entropy."""
    net = network(sc.model.conv)
    timer = GemmTimer(sc)
    e = _element_bytes(sc)
    b = sc.training.micro_batch
    last = net.blocks[-1]
    pooled_in = net.features * last.frames * last.size ** 2
    fwd, dgrad, wgrad, _, _ = timer.passes([Gemm(b, net.classes, net.features, fp8=False)])
    loss = LOSS_PASSES * b * net.classes * 4
    pool_f = b * (pooled_in + net.features) * e
    pool_b = b * (net.features + pooled_in) * e         # the gradient spread back over the map
    kept = b * (net.features * e + net.classes * 4)      # the fc input and the fp32 logits
    return EdgeCost(fwd + Work(0.0, 0.0, pool_f + loss), dgrad + Work(0.0, 0.0, pool_b + loss), wgrad,
                    float(net.head_params), kept)


def params(conv: Conv) -> float:
    """Trainable parameters of the network (explorer/workloads/convnet/arch.ConvNet.params)."""
    return float(network(conv).params)
