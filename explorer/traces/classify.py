"""What one trace event is: an iteration marker, compute, a collective (and which), or a marker
of the optimizer or recomputation.

Names are those PyTorch's profiler writes (torch 2.x, Kineto):
- iterations: the ``ProfilerStep#N`` user annotation ``profiler.step()`` opens (torch/profiler/
  profiler.py, ``record_function("ProfilerStep#" + str(self.step_num))``);
- collectives on the CPU: c10d's dispatcher ops (``c10d::allreduce_``, ``c10d::send``...), gloo's
  work annotations on its ``pt_gloo_runloop`` threads (``gloo:all_reduce``, ``gloo:send``...),
  ``nccl:*`` annotations and ``record_param_comms`` (the op that carries ``Collective name``,
  ``Process Group Name``/``Ranks`` and ``In msg nelems``: torch/csrc/distributed/c10d/
  ParamCommsUtils.hpp);
- collectives on a GPU: NCCL's kernels, ``ncclKernel_<Op>_...`` (NCCL <= 2.18) and
  ``ncclDevKernel_<Op>_...`` (2.19+), e.g. ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``;
- compute: every other CPU op (category ``cpu_op``) of a CPU-only trace, every other GPU kernel
  (category ``kernel``) of a trace that has GPU kernels (then CPU ops only launch them);
- the optimizer: ``Optimizer.step#SGD.step``-style annotations (torch/optim/optimizer.py wraps
  ``step`` and ``zero_grad`` in ``record_function``);
- recomputation: any op or annotation whose name says ``checkpoint`` or ``recompute``
  (torch.utils.checkpoint's ``CheckpointFunctionBackward``, user ``record_function`` marks).
"""
from __future__ import annotations

import re

STEP = re.compile(r"^ProfilerStep#(\d+)$")
# The collective an event's name says (lowercased, separators removed) -> the op's family.
_P2P = ("send", "recv", "sendrecv", "isend", "irecv", "batchisendirecv")
_ALL_TO_ALL = ("alltoall", "alltoallbase", "alltoallv")
_COLLECTIVES = ("allreduce", "allgather", "allgatherbase", "allgatherintotensor", "reducescatter",
                "reducescatterbase", "reducescattertensor", "broadcast", "reduce", "barrier", "gather",
                "scatter", "allreducecoalesced", "allgathercoalesced", "reducescattertensorcoalesced",
                "allgatherintotensorcoalesced", "coalesced") + _P2P + _ALL_TO_ALL
_COMM_PREFIX = re.compile(r"^(?:c10d::|gloo:|nccl:|ncclkernel_|nccldevkernel_|_?c10d_functional::)",
                          re.IGNORECASE)
_OPTIMIZER = re.compile(r"^Optimizer\.(?:step|zero_grad)#")
_RECOMPUTE = re.compile(r"checkpoint|recompute", re.IGNORECASE)


def step_number(ev: dict) -> int | None:
    """N of a ``ProfilerStep#N`` annotation, else None."""
    name = ev.get("name")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        m = STEP.match(name)
        return int(m.group(1)) if m else None
    return None


def collective_op(name: str, args: dict | None = None) -> str | None:
    """The collective an event is (``allreduce``, ``send``, ``alltoall``...), or None.

    ``record_param_comms`` names its op in ``args["Collective name"]``; the others in their name
    after the prefix (``c10d::allreduce_`` -> ``allreduce``, ``ncclDevKernel_AllReduce_Sum_f32``
    -> ``allreduce``)."""
    if name == "record_param_comms":
        coll = str((args or {}).get("Collective name", "")).lower().replace("_", "")
        return coll or "other"            # older torch writes no name: the enclosing op says it
    m = _COMM_PREFIX.match(name)
    if not m:
        return None
    rest = name[m.end():]
    word = re.split(r"[^A-Za-z_]", rest, maxsplit=1)[0]
    if m.group(0).lower().startswith("nccl") and m.group(0).lower().endswith("_"):
        word = word.split("_", 1)[0]          # kernel: the op is the first word after the prefix
    key = word.lower().replace("_", "")
    if key in _COLLECTIVES:
        return key
    if key.startswith(("wait", "work")):       # c10d's wait ops block on a collective already counted
        return "wait"
    return "other"


def dimension_of(op: str) -> str | None:
    """The dimension an op's family alone says: point-to-point is pipeline traffic (Megatron's and
    torch.distributed.pipelining's stages exchange activations with send/recv), all-to-all is
    expert parallelism (GShard/DeepSpeed-MoE dispatch); a reduction needs its process group."""
    if op in _P2P:
        return "pp"
    if op in _ALL_TO_ALL:
        return "ep"
    return None


def is_optimizer(name: str) -> bool:
    return bool(_OPTIMIZER.match(name))


def is_recompute(name: str) -> bool:
    return bool(_RECOMPUTE.search(name))


def is_gpu_kernel(ev: dict) -> bool:
    return ev.get("cat") == "kernel"
