"""Per-GPU memory: what each GPU class holds (Rajbhandari et al., ZeRO, SC20, Fig. 1 for the
sharding; activations per layer as the workload describes them, explorer/workloads/spec.py,
replayed over the schedule's order)."""
from __future__ import annotations

from ..network.compression import residual_bytes
from ..network.groups import Network
from ..taskgraph.builder import IterationBuilder
from ..taskgraph.techniques.fp8_memory import fp8_memory_bytes
from ..taskgraph.techniques.fsdp import zero3_working_set
from ..taskgraph.techniques.nccl_buffers import nccl_reserved_bytes
from ..taskgraph.techniques.optimizer import grad_buffer_bytes, optimizer_state_bytes, param_bytes
from .breakdown import MemoryBreakdown


def class_memory(b: IterationBuilder, net: Network, s: int, peak: float | None = None) -> MemoryBreakdown:
    """Per-GPU memory of class ``s``: parameters, gradients and optimizer state of the chunks it
    holds (as the ZeRO stage shards them), the FSDP working set, and activations at the peak of
    its program order (the registry's replay).  Reads the chunk descriptions and the order;
    ``peak``: the activations' peak when the caller replayed the order already (arrayfold)."""
    sc = b.sc
    zero = sc.parallelism.zero
    held = b.rank_chunks(s)
    chunks = [ch for ch, _ in held]
    dense = sum(c.params for c in chunks)
    expert = sum(c.expert_params for c in chunks)
    nd = net.group_size("dp", s)
    ne = net.group_size("edp", s) if expert else 1

    def shard(x_dense: float, x_expert: float, sharded: bool) -> float:
        return x_dense / nd + x_expert / ne if sharded else x_dense + x_expert

    # ZeRO (Rajbhandari et al. SC20, Fig. 1): stage 1 shards optimizer state, 2 also gradients,
    # 3 also parameters, each over the data-parallel group.
    weight = param_bytes(sc)       # bf16 working copy; the fp32 weight itself under fp32 training
    params = weight * shard(dense, expert, zero >= 3)
    # Weight stashing (PipeDream): one version per micro-batch in flight; 1 for the other schedules.
    params *= b.schedule.weight_versions(s, b.p)
    # The gradient buffer in the framework's dtype: fp32 for Megatron-Core's main_grad under bf16
    # (config/frameworks.py grad_buffer_in_reduce_dtype: 6 + 12/d bytes per parameter with the
    # distributed optimizer, Megatron-LM docs/source/api-guide/dist_optimizer.md).
    grads = grad_buffer_bytes(sc) * shard(dense, expert, zero >= 2)
    if zero >= 3 and (nd > 1 or ne > 1):
        # One rank holds whole parameters: nothing is gathered (PyTorch FSDP switches to NO_SHARD at
        # world size 1, torch/distributed/fsdp/_init_utils.py; a hunt found ZeRO-3 on dp 1 holding
        # 0.3 GB more than ZeRO-2).
        # FSDP working set: the gathered layer plus ``prefetch_layers`` gathered ahead, and one
        # layer's full gradients before their reduce-scatter; FSDP2 under a pipeline keeps the
        # stage gathered and its gradients accumulated unsharded (techniques/fsdp.py).
        # Only a group of more than one rank gathers: experts with ep = dp (edp 1) are held whole
        # in their shard already, and counting them again doubled them (a hunt: DeepSeek-V3 under
        # FSDP2 at ep 64 = dp, 83.7 GB shown as 98.5).
        layer = max(c.fsdp_layer_bytes for c in chunks)
        sharded = (dense if nd > 1 else 0.0) + (expert if ne > 1 else 0.0)
        gathered, unsharded_grads = zero3_working_set(sc, weight * sharded, layer)
        params += gathered
        grads += unsharded_grads
    opt = optimizer_state_bytes(sc) * shard(dense, expert, zero >= 1)
    # FP8 runs: the cached FP8 weight copies and the recipe's scaling state (fp8_memory.py).
    params += float(fp8_memory_bytes(sc, sum(c.fp8_params for c in chunks), sum(c.fp8_gemms for c in chunks),
                                     max(c.fp8_layer_params for c in chunks), nd > 1 or ne > 1))
    # Model-parallel state (embedding shards, workloads/spec.LayerCost.held_bytes) and frozen weights
    # (frozen layers, LoRA's base: taskgraph/chunks.chunk_held): this GPU's own, never sharded.
    params += sum(c.held_bytes for c in chunks)
    opt += sum(c.held_state_bytes for c in chunks)
    # Compressed gradients keep an error-feedback residual (explorer/network/compression.py).
    opt += residual_bytes(sc.communication.compression, dense, expert, nd, ne)
    # Activations at the schedule's peak, replaying the program order (exact for every schedule),
    # plus what one recomputed layer holds again during its own backward (LayerCost.recompute_bytes).
    if peak is None:
        peak = b.schedule.peak_activations(b.orders[s], [c.act_bytes for c in chunks])
    # NCCL's communicator buffers (nccl_buffers.py), the same on every GPU of the scenario.
    return MemoryBreakdown(params, grads, opt, peak + recompute_transient(b, chunks), nccl_reserved_bytes(sc))


def recompute_transient(b: IterationBuilder, chunks: list) -> float:
    """Bytes one recomputed layer re-materialises during its backward, for the largest layer kind
    this GPU holds (one layer at a time: Chen et al. 2016, Sec. 3); 0 without recompute."""
    return max((c.transient for c in chunks), default=0.0)
