"""What one GPU computes, keeps and sends for each layer of a VGG network, one micro-batch at a
time: the :class:`~explorer.workloads.spec.LayerCost` every workload fills, each weight layer a
pipeline layer of its own (so a stage split can put the 124M-parameter fully connected layers
apart from the convolutions, as PipeDream's partitioner does: Narayanan et al., SOSP 2019, Sec. 3.1).

- Convolutions run as implicit GEMMs (Chetlur et al., cuDNN, arXiv 1410.0759, Sec. 3): rows =
  samples x output positions, columns = output channels, inner = input channels x 9; the fully
  connected layers as plain GEMMs (samples x out x in).  Backward: the data gradient is the same
  GEMM transposed, the weight gradient reduces over the rows (explorer/workloads/timing.GemmTimer);
  conv1_1's data gradient is not computed (the image needs none: PyTorch's autograd skips it).
- Element-wise HBM passes (eager PyTorch, one kernel each): the convolution's bias add (read +
  write) and the in-place ReLU (read + write); a block's 2x2/2 max pool reads its input and writes
  its output plus an int64 index per output element; dropout after fc6/fc7 reads, writes and writes
  a one-byte mask.  Backward passes are twice the forward's (timing.BACKWARD_STREAM_FACTOR).
- Activations kept for the backward (PyTorch autograd): each layer's input (the GEMM's saved
  input), its ReLU output (which the pool also reads: one tensor), the pool's indices and the
  dropout masks.  The layer's output is the next layer's input and is counted there.
- ``out_bytes``: the layer's output for the micro-batch (after its pool), what a pipeline stage
  ending with it sends forward and receives back as a gradient.
"""
from __future__ import annotations

from functools import lru_cache

from ...config import Scenario
from ...config.model_parts import Conv
from ...physics.hardware import BYTES_PER_ELEMENT
from ...physics.work import ZERO_WORK, Gemm, Work
from ..spec import EdgeCost, LayerCost
from ..timing import BACKWARD_STREAM_FACTOR, GemmTimer
from . import vgg as vgg_arch

BIAS_PASSES = 2         # bias add: read + write
RELU_PASSES = 2         # in-place ReLU: read + write
POOL_INDEX_BYTES = 8    # max_pool2d_with_indices keeps an int64 index per output element
DROPOUT_PASSES = 2      # dropout: read + write (and a one-byte mask, below)
MASK_BYTES = 1          # dropout's bool mask per element
LOSS_PASSES = 3         # fp32 logits: write, max/sum read, read (the softmax cross-entropy)


@lru_cache(maxsize=64)
def network(conv: Conv) -> vgg_arch.Vgg:
    """The layer table of ``conv`` (cached: a scenario's layers are priced many times)."""
    return vgg_arch.build(conv.depth, conv.image_size, conv.width, conv.classes)


def layer_costs(sc: Scenario) -> tuple[LayerCost, ...]:
    """Every weight layer's cost for one micro-batch on one GPU, in forward order."""
    net = network(sc.model.conv)
    timer = GemmTimer(sc)
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    b = sc.training.micro_batch
    out = []
    for i, x in enumerate(net.layers):
        fwd, dgrad, wgrad, _, _ = timer.passes([Gemm(b * x.positions, x.c_out, x.reduction, fp8=False)])
        if i == 0:
            dgrad = ZERO_WORK                      # the image needs no gradient
        n = x.conv_elements
        stream = (BIAS_PASSES + (RELU_PASSES if x.relu else 0)) * n * e
        kept = (x.in_elements + (n if x.relu else 0)) * e
        if x.pool:
            stream += (n + x.out_elements) * e + x.out_elements * POOL_INDEX_BYTES
            kept += x.out_elements * POOL_INDEX_BYTES
        if x.dropout:
            stream += DROPOUT_PASSES * n * e + n * MASK_BYTES
            kept += n * MASK_BYTES
        out.append(LayerCost(
            fwd=fwd + Work(0.0, 0.0, b * stream),
            bwd_input=dgrad + Work(0.0, 0.0, BACKWARD_STREAM_FACTOR * b * stream),
            bwd_weight=wgrad, recompute=ZERO_WORK, attn_core_fwd=ZERO_WORK, expert_fwd=ZERO_WORK,
            params=float(x.params), expert_params=0.0, act_bytes=b * kept,
            tp_fwd=(), tp_bwd=(), tp_recompute=(), ep_fwd=(), ep_bwd=(), cp_kv_bytes=0.0,
            out_bytes=float(b * x.out_elements * e)))
    return tuple(out)


def input_cost(sc: Scenario) -> EdgeCost:
    """Before conv1_1 on the first chunk: the fp32 image cast to the compute dtype (read 4 bytes,
    write e per element); nothing to learn, nothing kept beyond conv1_1's input (counted there)."""
    net = network(sc.model.conv)
    e = BYTES_PER_ELEMENT[sc.training.dtype]
    b = sc.training.micro_batch
    image = 3 * net.image_size ** 2
    return EdgeCost(Work(0.0, 0.0, b * image * (4 + e)), ZERO_WORK, ZERO_WORK, 0.0, 0.0)


def loss_cost(sc: Scenario) -> EdgeCost:
    """After fc8 on the last chunk: the fp32 softmax cross-entropy over the classes; keeps the
    fp32 logits."""
    net = network(sc.model.conv)
    b = sc.training.micro_batch
    loss = LOSS_PASSES * b * net.classes * 4
    return EdgeCost(Work(0.0, 0.0, loss), Work(0.0, 0.0, loss), ZERO_WORK, 0.0, b * net.classes * 4.0)
