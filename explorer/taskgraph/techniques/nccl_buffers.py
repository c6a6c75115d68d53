"""GPU memory NCCL's communicators hold: counted in every GPU's memory total.

NCCL allocates its channel buffers when a communicator first runs a collective, and keeps them for
the life of the communicator.  Measured with PyTorch on 4 A100s over NVLink, running a 4 MB
all-reduce in every process group: a group of 2 GPUs takes 544 MB per GPU, a group of more takes
688 MB (NVIDIA/nccl issue #964); NCCL's maintainers explain that the figure grows with the
channels (bandwidth) and the algorithms in use, and stops growing beyond two nodes (NVIDIA/nccl
issue #864 / #986).  A training process holds one communicator per parallel group it
communicates in: tensor, context, expert, pipeline (its stage-to-stage sends), data (Megatron
reduces gradients over data x context parallel ranks) and, with experts, the expert-data-parallel
group that reduces the experts' gradients.

What this does not count — the CUDA context, the caching allocator's fragmentation — is the
headroom a recommendation leaves on top (explorer/analysis/verdict.py, DEFAULT_HEADROOM_GB).
"""
from __future__ import annotations

from ...config import Scenario

PAIR_COMM_BYTES = 544e6        # NVIDIA/nccl #964: a communicator of 2 GPUs, per GPU
GROUP_COMM_BYTES = 688e6       # NVIDIA/nccl #964: a communicator of 3 or more GPUs, per GPU


def communicator_bytes(size: int) -> float:
    """Bytes per GPU of one communicator of ``size`` GPUs (none for a group of one)."""
    if size <= 1:
        return 0.0
    return PAIR_COMM_BYTES if size == 2 else GROUP_COMM_BYTES


def group_sizes(sc: Scenario) -> tuple[int, ...]:
    """The parallel groups one GPU communicates in, by size: tp, cp, ep, pp, dp x cp (the gradient
    reduction's group) and, for a model with experts under EP, the expert-data-parallel group."""
    p = sc.parallelism
    sizes = [p.tp, p.cp, p.pp, sc.dp * p.cp]
    if sc.model.moe is not None and p.ep > 1:
        sizes += [p.ep, max(sc.dp * p.cp // p.ep, 1)]
    return tuple(sizes)


def nccl_reserved_bytes(sc: Scenario) -> float:
    """Bytes per GPU held by the NCCL communicators of the scenario's groups (module docstring)."""
    return sum(communicator_bytes(n) for n in group_sizes(sc))
