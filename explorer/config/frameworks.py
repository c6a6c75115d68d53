"""Training frameworks as the mechanisms that make the same model and parallelism run at different
speeds: fused element-wise kernels, blocking pipeline point-to-point, gradient bucket sizes, the
dtype gradients are reduced in, whether gradient reduction and parameter gathers overlap compute,
and how far ZeRO-3 prefetches.  ``training.framework`` selects one :class:`FrameworkProfile`; every
field is a default of that framework's source or documentation (cited where it is set), read by
the part of the simulator that models the mechanism:

- ``elementwise_factor``: explorer/workloads/transformer/layer.py (HBM passes of the element-wise kernels);
- ``blocking_p2p``: explorer/taskgraph/builder.py (pipeline transfers on the compute stream);
- ``default_bucket_MB``: explorer/config/loading.py fills ``communication.bucket_MB`` with it;
- ``grad_reduce_bytes``: explorer/taskgraph/techniques/dp_buckets.py and fsdp.py;
- ``grad_buffer_bytes`` (``grad_buffer_in_reduce_dtype``): the gradients memory holds
(explorer/analysis/memory.py, explorer/pricing/memory.py, explorer/taskgraph/split_cost.py);
- ``grad_reduce_overlaps_backward`` / ``param_gather_overlaps_forward``: builder.py;
- ``zero3_prefetch_params``: explorer/taskgraph/techniques/fsdp.py;
- ``selective_policy``: explorer/workloads/transformer/layer.py (what ``training.recompute: selective``
repeats);
- ``wgrad_accumulate_fp32``: explorer/workloads/transformer/layer.py (the weight-gradient GEMM's epilogue
traffic);
- ``p2p_scatter_gather``: explorer/taskgraph/layer.py (bytes of one pipeline transfer);
- ``tp_overlap_sms``: explorer/workloads/timing.py (SMs the TP comm-GEMM overlap takes from the GEMMs);
- ``nccl_sms_under_compute``: explorer/config/loading.py (the default of ``communication.comm_sms``);
- ``fsdp_copy_kernels``: explorer/taskgraph/layer.py price_fsdp (FSDP2's copy-in/copy-out kernels);
- ``fsdp_pp_step_sync``: explorer/taskgraph/techniques/fsdp.py comm_zero (FSDP2 under a pipeline).

PyTorch-native stacks: ``fsdp`` (FSDP1, flat parameters) and ``fsdp2`` (the per-parameter DTensor
rewrite) train eager modules whose gathers and reduce-scatters are NCCL kernels beside the compute;
``fsdp2`` adds its copy kernels on the compute stream and, under a pipeline, gathers once and
reduces once per step; ``torchtitan`` is FSDP2 with ``torch.compile`` per transformer block
(element-wise chains fused by Inductor) and PyTorch's async TP as its TP overlap (copy-engine
transfers, no SMs taken from the GEMMs).

>>> profile("deepspeed").grad_reduce_bytes("bf16"), profile("megatron").grad_reduce_bytes("bf16")
(2, 4)
"""
from __future__ import annotations

from dataclasses import dataclass

FRAMEWORKS = ("megatron", "deepspeed", "megatron-deepspeed", "fsdp", "fsdp2", "torchtitan")
_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}   # fp8 runs keep bf16 gradients (TE recipes)
GRAD_BYTES = 2        # a bf16/fp16 gradient per parameter (the memory model's mixed-precision default)

# --- element-wise kernels -----------------------------------------------------------------------
# HBM passes per element (one read or one write of an activation element) of the element-wise work
# of one Llama layer, fused as Megatron-Core runs it (Transformer Engine fused RMSNorm; fused rotary,
# --apply-rope-fusion; fused SwiGLU, --bias-swiglu-fusion: each one read and one write per input
# and output) against eager PyTorch as Hugging Face transformers writes the layer
# (models/llama/modeling_llama.py: LlamaRMSNorm = cast to fp32, pow, mean, mul by rsqrt, cast back,
# mul by weight; apply_rotary_pos_emb = q*cos + rotate_half(q)*sin with rotate_half a slice, neg
# and cat; LlamaMLP = act_fn(gate) * up as two kernels).  Residual adds are one kernel either way.
_FUSED_PASSES = {"rmsnorm": 2, "rope": 2, "swiglu": 3, "residual": 3}
_EAGER_PASSES = {"rmsnorm": 11, "rope": 13, "swiglu": 5, "residual": 3}
# The eager chains' kernels (casts to fp32 and back, a row reduction, broadcast multiplies, slices
# and a cat) stream at a lower share of HBM than one fused kernel: fitted on Liger-Kernel's
# published A100-SXM4-80GB benchmark (linkedin/Liger-Kernel benchmark/data/all_benchmark_data.csv,
# liger 0.2.1, bf16), Hugging Face's eager module against Liger's fused Triton kernel, forward:
# RMSNorm at M 2048 x H 8192, 0.5190 against 0.0517 ms (10.04x, where the pass counts above give
# 11/2 = 5.5x); rotary at T 16384, hidden 8192, 32 query and 8 KV heads, 3.817 against 0.4105 ms
# (9.30x against 13/2 = 6.5x).  Geometric mean of 10.04/5.5 and 9.30/6.5: the eager chains run at
# 1/1.616 = 0.62 of the fused kernels' bandwidth.  (The residual add is one kernel either way.)
EAGER_CHAIN_BANDWIDTH = round(1 / ((10.04 / 5.5) * (9.30 / 6.5)) ** 0.5, 3)     # 0.619


def _eager_factor(hidden: int = 4096, kv: int = 1024, ffn: int = 14336, bandwidth: float = 1.0) -> float:
    """Eager over fused element-wise time of one Llama layer per token (default widths: Llama 3 8B,
    Dubey et al. 2024 Table 3: h 4096, 8 KV heads of 128, FFN 14336): two norms and two residual
    adds over h, rotary over q (h) and k (kv), SwiGLU over the FFN width; the eager chains' passes
    at ``bandwidth`` of a fused kernel's."""
    def chains(p: dict[str, int]) -> float:
        return 2 * p["rmsnorm"] * hidden + p["rope"] * (hidden + kv) + p["swiglu"] * ffn

    residual = 2 * _FUSED_PASSES["residual"] * hidden
    return (chains(_EAGER_PASSES) / bandwidth + residual) / (chains(_FUSED_PASSES) + residual)


# By the pass counts alone (2.68): what eager frameworks charge a GeLU layer (GPT, BERT, MPT).  Its
# LayerNorm and GeLU are native PyTorch kernels (one read and one write each), which would argue
# for about 1; but the only eager GeLU runs the project holds (llm-foundry's MPT rows,
# explorer/data/reference/training_runs.csv) then read up to +36 % fast (MPT-13B on 64 H100s):
# something else those runs pay is not modelled yet, so their factor is left where it was.
EAGER_ELEMENTWISE_FACTOR = round(_eager_factor(), 2)    # 2.68
# A Llama layer (SwiGLU; RMSNorm and rotary written as PyTorch op chains, Hugging Face's
# modeling_llama and torchtitan's eager modules): the chains at their measured bandwidth.
EAGER_LLAMA_ELEMENTWISE_FACTOR = round(_eager_factor(bandwidth=EAGER_CHAIN_BANDWIDTH), 2)    # 4.18



def elementwise_factor(framework: str, ffn_kind: str) -> float:
    """The element-wise time factor of ``framework`` for a layer whose FFN is ``ffn_kind``: an eager
    framework charges a SwiGLU (Llama) layer :data:`EAGER_LLAMA_ELEMENTWISE_FACTOR`, its RMSNorm
    and rotary chains at their measured bandwidth, and a GeLU layer the pass counts'
    :data:`EAGER_ELEMENTWISE_FACTOR`; fused and compiled frameworks their own factor."""
    got = profile(framework).elementwise_factor
    return EAGER_LLAMA_ELEMENTWISE_FACTOR if got == EAGER_ELEMENTWISE_FACTOR and ffn_kind == "swiglu" else got

# torch.compile: fused pass counts, at Inductor's measured bandwidth (see the torchtitan profile).
COMPILED_ELEMENTWISE_FACTOR = round(3.35 * 0.8 / 2.0, 2)     # 1.34

# --- TP comm-GEMM overlap -----------------------------------------------------------------------
# Transformer Engine's userbuffers overlap (Megatron-Core ``tp_comm_overlap``):
# transformer_engine/pytorch/module/base.py initialize_ub, default_cfg: the "pipeline" method
# (proj_fprop, fc2_fprop) and the "bulk" method (qkv/fc1 dgrad and wgrad) run their communication
# kernel on num_sm = 16 SMs with set_sm_margin = True (the GEMM gets the other SMs);
# "ring_exchange" (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad) uses num_sm = 1 and the copy engine.
TE_UB_COMM_SMS = 16
# The same default_cfg cuts the GEMM into chunks: num_splits = 4 for "pipeline" (the row-parallel
# forward GEMM and its reduce-scatter) and tp_size for "ring_exchange" (one chunk per TP rank).
TE_UB_PIPELINE_SPLITS = 4


@dataclass(frozen=True)
class FrameworkProfile:
    """What one training framework does by default that changes iteration time."""

    name: str
    elementwise_factor: float          # HBM traffic of element-wise kernels relative to fused ones (1.0)
    blocking_p2p: bool                 # pipeline send/recv run in the compute stream's program order
    bucket_elements: float | None      # gradient bucket in elements; None: a fixed byte size below
    bucket_elements_per_dp_rank: float  # Megatron-Core grows the bucket with the DP group
    bucket_bytes: float                # used when bucket_elements is None (PyTorch DDP bucket_cap_mb)
    grad_reduce_fp32: tuple[str, ...]  # training dtypes whose gradients are reduced in fp32
    grad_reduce_overlaps_backward: bool  # buckets leave during the backward (else after it)
    param_gather_overlaps_forward: bool  # ZeRO-1/2 parameter all-gather under the next forward
    zero3_prefetch_params: float | None  # ZeRO-3 prefetch budget in parameters; None: whole layers
    # What selective recomputation repeats: "modules" = Megatron-Core's recompute_modules
    # (training.recompute_modules); "every-other-matmul" = torchtitan's op-level selective AC.
    selective_policy: str = "modules"
    # Weight-gradient GEMMs accumulate into an fp32 main_grad buffer in their epilogue (read and
    # write C in fp32, explorer/physics/kernels.py) instead of writing a bf16/fp16 gradient.
    wgrad_accumulate_fp32: bool = False
    # Each TP rank sends 1/tp of a stage's output to the next stage (Megatron's scatter/gather
    # optimisation, Narayanan et al. SC21 Sec. 4.1) rather than the whole replicated tensor.
    p2p_scatter_gather: bool = True
    # SMs the TP communication kernels hold while they overlap the GEMMs they feed
    # (``communication.tp_overlap``); 0: copy-engine transfers (PyTorch async TP).
    tp_overlap_sms: int = TE_UB_COMM_SMS
    # Chunks the overlapped row-parallel forward GEMM is cut into; None: one per TP rank.
    tp_overlap_rs_splits: int | None = TE_UB_PIPELINE_SPLITS
    # The data-parallel collectives that overlap compute are NCCL kernels holding one SM per channel
    # (explorer/config/nccl_channels.py): the default of ``communication.comm_sms`` becomes NCCL's
    # channel count for the DP group instead of 0.
    nccl_sms_under_compute: bool = False
    # FSDP2's per-parameter copies on the compute stream around each gather and reduce-scatter
    # (techniques/fsdp.py fsdp_copy_bytes); FSDP1's flat parameter gathers in place.
    fsdp_copy_kernels: bool = False
    # With pp > 1 the parameters stay gathered across micro-batches and gradients are reduced once,
    # after the stage's last backward (techniques/fsdp.py comm_zero): torch.distributed.pipelining.
    fsdp_pp_step_sync: bool = False
    # The gradient buffer held between backward and optimizer step is allocated in the reduce dtype
    # (Megatron-Core's main_grad buffer), not in the parameters' dtype.
    grad_buffer_in_reduce_dtype: bool = False

    def grad_reduce_bytes(self, dtype: str) -> int:
        """Bytes per gradient element on the wire for a run trained in ``dtype``."""
        return 4 if dtype in self.grad_reduce_fp32 else _DTYPE_BYTES[dtype]

    def grad_buffer_bytes(self, dtype: str) -> int:
        """Bytes per parameter of the gradient buffer memory holds for a run trained in ``dtype``:
        the reduce dtype's where the framework accumulates into a buffer of that dtype, else the
        bf16 gradient (GRAD_BYTES, explorer/taskgraph/techniques/optimizer.py), or the fp32 one of a
        run trained in fp32."""
        if self.grad_buffer_in_reduce_dtype:
            return self.grad_reduce_bytes(dtype)
        return max(GRAD_BYTES, _DTYPE_BYTES[dtype])

    def default_bucket_MB(self, dp: int, dtype: str) -> float:
        """The framework's gradient bucket for a data-parallel group of ``dp`` ranks, in MB."""
        if self.bucket_elements is None:
            return self.bucket_bytes / 1e6
        elements = max(self.bucket_elements, self.bucket_elements_per_dp_rank * dp)
        return elements * self.grad_reduce_bytes(dtype) / 1e6


_MEGATRON = FrameworkProfile(
    name="megatron",
    elementwise_factor=1.0,             # fused kernels (see _FUSED_PASSES)
    # Megatron-Core's 1F1B exchanges activations with batched isend/irecv on NCCL's own stream
    # (core/pipeline_parallel/p2p_communication.py); the simulator's pp stream.
    blocking_p2p=False,
    # core/distributed/distributed_data_parallel.py: bucket_size = max(40,000,000, 1,000,000 x dp)
    # elements when --ddp-bucket-size is not given.
    bucket_elements=40e6, bucket_elements_per_dp_rank=1e6, bucket_bytes=0.0,
    # megatron/training/arguments.py: bf16 forces accumulate_allreduce_grads_in_fp32 ("bfloat16
    # requires gradient accumulation and all-reduce to be done in fp32") unless
    # --grad-reduce-in-bf16; fp16 reduces in fp16.  FP8 runs train with --bf16.
    grad_reduce_fp32=("bf16", "fp8", "fp32"),
    grad_reduce_overlaps_backward=True,   # --overlap-grad-reduce (communication.dp_overlap)
    param_gather_overlaps_forward=True,   # --overlap-param-gather with the distributed optimizer
    zero3_prefetch_params=None,
    # megatron/training/arguments.py: gradient_accumulation_fusion is on unless
    # --no-gradient-accumulation-fusion; Megatron-Core's linear layers then call
    # fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32 into weight.main_grad, and Transformer
    # Engine's Linear does the same with fuse_wgrad_accumulation (NeMo recipes:
    # gradient_accumulation_fusion: true).
    wgrad_accumulate_fp32=True,
    # megatron/core/distributed/distributed_data_parallel.py (Megatron-Core DDP) allocates every
    # parameter's main_grad in one contiguous _ParamAndGradBuffer of dtype
    # ``torch.float if ddp_config.grad_reduce_in_fp32 else param.dtype``, whole on every DP rank
    # even with the distributed optimizer (which reduce-scatters within that buffer): Megatron-LM's
    # docs/source/api-guide/dist_optimizer.md counts bf16 parameters with fp32 gradients as
    # 18 bytes per parameter, 6 + 12/d with the distributed optimizer (2 weight + 4 gradient + 12
    # optimizer state over d), as megatron/training/theoretical_memory_usage.py does.  On for bf16
    # (grad_reduce_fp32 above) and in NeMo's bf16_mixed() plugin and the recipes' DDP config
    # (nemo/collections/llm/recipes/precision/mixed_precision.py, recipes/llama31_405b.py:
    # grad_reduce_in_fp32=True); NeMo's FP8 performance scripts turn it off, which no scenario
    # field says yet.
    grad_buffer_in_reduce_dtype=True,
)

_DEEPSPEED = FrameworkProfile(
    name="deepspeed",
    # DeepSpeed trains the user's (typically Hugging Face, eager) model: no fused kernels.
    elementwise_factor=EAGER_ELEMENTWISE_FACTOR,
    # runtime/pipe/engine.py executes SendActivation/RecvActivation/SendGrad/RecvGrad instructions
    # in order with runtime/pipe/p2p.py send/recv (dist.send/recv, blocking): transfers do not
    # overlap the stage's compute.
    blocking_p2p=True,
    # docs config-json "zero_optimization": reduce_bucket_size / allgather_bucket_size 5e8 elements;
    # the pipeline engine's ReduceGrads uses the same 5e8 (MEMORY_OPT_ALLREDUCE_SIZE).
    bucket_elements=5e8, bucket_elements_per_dp_rank=0.0, bucket_bytes=0.0,
    # runtime/engine.py communication_data_type: fp16 for fp16, bf16 for bf16 unless configured.
    grad_reduce_fp32=("fp32",),
    # ZeRO-1/2 "overlap_comm" defaults to false (docs config-json); the pipeline engine reduces in
    # its ReduceGrads instruction after the last backward of the batch (pipe/schedule.py TrainSchedule).
    grad_reduce_overlaps_backward=False,
    # ZeRO-1/2 all-gather the updated partitions inside optimizer.step() (stage_1_and_2.py).
    param_gather_overlaps_forward=False,
    # runtime/zero/config.py: stage3_prefetch_bucket_size = 5e7 parameters fetched ahead of use.
    zero3_prefetch_params=5e7,
    # runtime/pipe/engine.py _exec_send_activations sends the stage's output tensors as they are:
    # with Megatron's TP layers inside (Megatron-DeepSpeed) that is the full, TP-replicated
    # activation from every TP rank (no scatter/gather).
    p2p_scatter_gather=False,
)

FRAMEWORK_PROFILES: dict[str, FrameworkProfile] = {
    "megatron": _MEGATRON,
    "deepspeed": _DEEPSPEED,
    # Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed): Megatron's model code with its fused kernels
    # (bias-GeLU, fused softmax, fused LayerNorm), trained by the DeepSpeed engine and, with pp > 1,
    # its PipelineEngine: DeepSpeed's point-to-point, buckets, gradient dtype and overlap.
    # Its Megatron layers keep gradient_accumulation_fusion (on by default in its arguments.py too).
    "megatron-deepspeed": FrameworkProfile(**{**_DEEPSPEED.__dict__, "name": "megatron-deepspeed",
                                              "elementwise_factor": 1.0, "wgrad_accumulate_fp32": True}),
    "fsdp": FrameworkProfile(
        name="fsdp",
        elementwise_factor=EAGER_ELEMENTWISE_FACTOR,   # eager PyTorch modules (torchtitan, HF)
        blocking_p2p=False,             # torch.distributed.pipelining issues isend/irecv
        # FSDP reduces one wrapped unit at a time (the layer, techniques/fsdp.py); unsharded DP is
        # PyTorch DDP with bucket_cap_mb = 25 (torch/nn/parallel/distributed.py; Li et al. VLDB 2020).
        bucket_elements=None, bucket_elements_per_dp_rank=0.0, bucket_bytes=25e6,
        # torchtitan (PyTorch's FSDP2 reference trainer) config: mixed_precision_reduce = "float32"
        # with bf16 parameters (MixedPrecisionPolicy reduce_dtype).
        grad_reduce_fp32=("bf16", "fp16", "fp8", "fp32"),
        grad_reduce_overlaps_backward=True,
        param_gather_overlaps_forward=True,
        # FSDP prefetches whole units: BackwardPrefetch.BACKWARD_PRE and limit_all_gathers (at most
        # two all-gathers in flight; Zhao et al., "PyTorch FSDP", VLDB 2023, Sec. 3.3.2/4.3).
        zero3_prefetch_params=None,
        # torchtitan's op-level selective activation checkpointing (activation_checkpoint.py,
        # selective_ac_option "op", the "selective op" rows of docs/performance.md): the outputs of
        # matmuls and of scaled_dot_product_attention are saved, except every second matmul of a
        # layer, which is recomputed with every element-wise op (norms, rotary, activations).
        selective_policy="every-other-matmul",
        # FSDP's all-gathers and reduce-scatters run concurrently with almost all of the forward and
        # backward (Zhao et al., VLDB 2023, Sec. 3.3 / Fig. 4): NCCL kernels, one SM per channel.
        nccl_sms_under_compute=True,
    ),
}

# FSDP2 (torch.distributed.fsdp.fully_shard, the per-parameter-sharding rewrite torchtitan trains
# with): eager modules, reduce dtype, unit-wise prefetch and op-level SAC as ``fsdp``; unlike FSDP1's
# flat parameter (whose parameters are views into the gathered buffer), FSDP2 copies every gathered
# parameter out of the all-gather buffer and every gradient into the reduce-scatter buffer on the
# compute stream (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py,
# foreach_all_gather_copy_out / foreach_reduce_scatter_copy_in; techniques/fsdp.py).
# With a pipeline, torchtitan's default reshard_after_forward policy is ``not pp_enabled``
# (pytorch/torchtitan torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy, commit
# b5bcd76: "do not reshard after forward to avoid per-microbatch all-gathers"), and the pipeline stage
# runs every backward with set_reshard_after_backward(False) and set_requires_gradient_sync(False),
# reducing all gradients in perform_reduce_grad after the stage's last backward (pytorch/pytorch
# torch/distributed/pipelining/stage.py backward_maybe_with_nosync / _post_backward; schedules.py
# _add_reduce_grad: REDUCE_GRAD "just after the last backward"), where the compute stream waits for
# the reduce-scatters (_root_post_backward_final_callback): fsdp_pp_step_sync.
FRAMEWORK_PROFILES["fsdp2"] = FrameworkProfile(**{**FRAMEWORK_PROFILES["fsdp"].__dict__, "name": "fsdp2",
                                                  "fsdp_copy_kernels": True, "fsdp_pp_step_sync": True})
# torchtitan with its ``--compile`` (torch.compile of each TransformerBlock, torchtitan
# docs/torch.compile.md / models/llama3/infra/parallelize.py apply_compile): Inductor fuses the
# element-wise chains of the block (RMSNorm's cast/pow/mean/rsqrt/mul, rotary's slice/neg/cat/mul,
# SiLU x up) into single kernels that read each input and write each output once, the pass counts of
# _FUSED_PASSES; but Inductor's generated reduction kernels stream slower than hand-written ones:
# on H100 a softmax compiled by torch.compile reaches about 2.0 TB/s where a tuned CuTe-DSL kernel
# reaches 3.01 TB/s (Guo, Zadouri, Dao, "Getting Memory-bound Kernels to Speed-of-Light", Princeton
# SysML blog 2025, softmax benchmark), against the 3.35 x HBM_EFFICIENCY (0.8) = 2.68 TB/s the
# simulator gives fused kernels: factor 2.68 / 2.0 = 1.34 (COMPILED_ELEMENTWISE_FACTOR).  Its TP
# overlap is PyTorch's async TP (torchtitan ``enable_async_tensor_parallel``;
# torch/distributed/_symmetric_memory: micro-pipelined all-gather-matmul and
# matmul-reduce-scatter whose chunks move by copy engine between symmetric
# buffers), which takes no SMs from the GEMMs (tp_overlap_sms 0) and cuts both overlapped GEMMs
# into one chunk per TP rank (_fused_all_gather_matmul / _fused_matmul_reduce_scatter).
FRAMEWORK_PROFILES["torchtitan"] = FrameworkProfile(**{**FRAMEWORK_PROFILES["fsdp2"].__dict__,
                                                       "name": "torchtitan",
                                                       "elementwise_factor": COMPILED_ELEMENTWISE_FACTOR,
                                                       "tp_overlap_sms": 0, "tp_overlap_rs_splits": None})


def profile(name: str) -> FrameworkProfile:
    """The profile of framework ``name`` (one of FRAMEWORKS); KeyError names the choices."""
    try:
        return FRAMEWORK_PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; choose one of {', '.join(FRAMEWORKS)}") from None
