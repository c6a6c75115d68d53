"""Which kernels move MoE tokens over the expert-parallel group (``communication.moe_dispatcher``),
and the SMs they hold while they run.

- ``alltoall``: NCCL all-to-all (Megatron-Core's ``alltoall`` token dispatcher, GShard-style): each
  of a token's top_k copies crosses the fabric on its own.  NCCL's all-to-all runs as ordinary NCCL
  kernels; the project's default of 0 SMs for communication (loading.DEFAULT_COMM_SMS) applies.
- ``deepep``: DeepEP's normal (high-throughput) kernels (deepseek-ai/DeepEP, docs/legacy.md; the
  node-aware dispatch of the DeepSeek-V3 report, arXiv 2412.19437, Sec. 3.2.2): a token crosses
  the scale-out fabric once per destination *node* and is forwarded over NVLink to the GPUs that
  hold its experts.  They run on ``DEEPEP_SMS`` SMs.
- ``hybridep``: NVIDIA's Hybrid-EP (DeepEP pull request #420, "Add HybridEP solution for normal mode
  intranode dispatch/combine"; Megatron-Core's flex dispatcher backend ``hybridep``): the same
  hierarchical, node-deduplicated routing, with TMA copies on NVLink and fewer SMs
  (``HYBRIDEP_SMS``).

Unset, the dispatcher follows the routing: node-limited routing (``model.moe.max_nodes`` > 0) is
the routing DeepSeek-V3 pairs with node-aware dispatch (Sec. 3.2.2), so it means ``deepep``;
otherwise Megatron-Core's ``alltoall``.
"""
from __future__ import annotations

from .model_parts import MoE

DISPATCHERS = ("alltoall", "deepep", "hybridep")
# DeepEP V1 normal kernels: 24 SMs (docs/legacy.md's example ``Buffer.set_num_sms(24)`` and
# tests/test_internode.py ``num_sms = 24``, the setting of its measured bandwidths).
DEEPEP_SMS = 24
# Hybrid-EP: 16 SMs for dispatch and 16 for combine by default (pytorch/torchtitan pull request
# #2207, HYBRIDEP_NUM_SMS_DISPATCH / HYBRIDEP_NUM_SMS_COMBINE).
HYBRIDEP_SMS = 16
DISPATCHER_SMS = {"alltoall": 0, "deepep": DEEPEP_SMS, "hybridep": HYBRIDEP_SMS}

# Field metadata of ``communication.comm_sms`` and ``communication.moe_dispatcher`` (sections.py),
# kept here beside the defaults they describe.
COMM_SMS_FIELD = {
    "min": 0, "max": 100_000,
    "doc": "SMs communication kernels occupy while they overlap a pass's compute (DeepSeek-V3: 20 of "
           "132); default: the MoE dispatcher's (deepep 24, hybridep 16), else 0 (overlap costs no SMs)"}
DISPATCHER_FIELD = {
    "choices": DISPATCHERS,
    "doc": "MoE token dispatch over EP: alltoall = NCCL all-to-all, every top_k copy on its own; "
           "deepep / hybridep = once per destination node over the NICs, then NVLink forwarding; "
           "default deepep when model.moe.max_nodes > 0, else alltoall"}


def resolved_dispatcher(choice: str | None, moe: MoE | None) -> str:
    """The dispatcher in force: ``choice`` when set, else ``deepep`` under node-limited routing
    (``moe.max_nodes`` > 0) and ``alltoall`` otherwise (module docstring).

    >>> resolved_dispatcher(None, MoE(experts=256, top_k=8, max_nodes=4))
    'deepep'
    >>> resolved_dispatcher(None, MoE(experts=8, top_k=2)), resolved_dispatcher("hybridep", None)
    ('alltoall', 'hybridep')
    """
    if choice is not None:
        return choice
    return "deepep" if moe is not None and moe.max_nodes > 0 else "alltoall"


def dispatcher_sms(choice: str | None, moe: MoE | None, ep: int) -> int:
    """SMs the EP dispatch/combine kernels hold (the default of ``communication.comm_sms``): the
    dispatcher's own count when experts are spread over more than one GPU, else 0."""
    if moe is None or not moe.routed or ep <= 1:
        return 0
    return DISPATCHER_SMS[resolved_dispatcher(choice, moe)]
