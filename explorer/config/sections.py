"""The scenario's sections: frozen dataclasses whose fields carry their own rules.

Each field has a one-line ``doc``, its unit in its name and its bounds in ``metadata`` (the keys
are listed in :mod:`explorer.config.schema`).  The validator, the README's field table
(:mod:`explorer.config.docs`) and the app's widgets all read these definitions, so a field is
documented and checked where it is declared.  Fields typed ``X | None`` whose doc says "default
..." are *derived defaults*: the loader (:func:`explorer.config.loading.from_dict`) fills them
once, at load, so every consumer of a loaded :class:`Scenario` reads a number, never ``None``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..collective_algorithms import registry as algorithms
from ..schedules import registry
from .bounds import COMPUTE_EFFICIENCY, LATENCY_US, POWER_CAP_W, SCALE_UP_GBPS, TFLOPS
from .compression import Compression
from .contention import CONTENTION_DOC
from .faults import Faults
from .fp8_recipes import FP8_RECIPE_FIELD
from .inference import INFERENCE_FIELD, Inference
from .model_parts import ATTN_KERNEL, FLASH_ATTN
from .model_section import Model
from .moe_dispatch import COMM_SMS_FIELD, DISPATCHER_FIELD
from .replica_field import STAGE_REPLICAS_FIELD
from .run_plan import PHASES_FIELD, TOTAL_TOKENS_FIELD, Phase, Reliability
from .stragglers import Stragglers
from .sync import DP_KINDS, Sync
from .wan import ScaleAcross

MAX_GPUS = 10_000_000          # "sizes beyond sane limits" (issue 2): more GPUs than any cluster

ORDER_DIMS = ("tp", "cp", "dp", "pp")
# Scale-out link technologies with a preset in explorer/data/fabrics.yaml.
FABRICS = ("ib-hdr", "ib-ndr", "ib-xdr", "roce-100", "roce-400", "efa", "eth-100", "eth-25")
SCHEDULES = registry.names()    # the pipeline schedules the registry describes (explorer/schedules)


# Which linears carry LoRA adapters (workloads/transformer/lora.py ``targeted``).
LORA_TARGETS = ("all", "attention", "qkv")


@dataclass(frozen=True)
class Training:
    """Batch, precision, recomputation and optimizer."""

    global_batch: int = field(default=0, metadata={"required": True, "min": 1, "max": 100_000_000,
                                                   "doc": "sequences per iteration"})
    micro_batch: int = field(default=1, metadata={"min": 1, "max": 1_000_000,
                                                  "doc": "sequences per micro-batch"})
    dtype: str = field(default="bf16", metadata={"choices": ("bf16", "fp16", "fp8", "fp32"),
                                                 "doc": "compute and activation precision"})
    recompute: str = field(default="none", metadata={"choices": ("none", "selective", "full"),
                                                     "doc": "activation recomputation "
                                                            "(Korthikanti et al. 2022); selective "
                                                            "under fsdp is torchtitan's op-level AC"})
    optimizer: str = field(default="adam", metadata={"choices": ("adam", "adam-bf16", "sgd"), "doc": (
        "optimizer (sets state bytes per parameter); adam-bf16 keeps Adam's moments in bf16 (DeepSeek-V3)")})
    flash_attention: bool = field(default=True, metadata=FLASH_ATTN)
    attention_kernel: str = field(default="auto", metadata=ATTN_KERNEL)
    recompute_modules: tuple[str, ...] = field(default=("core_attn",), metadata={
        "choices": ("core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp"), "max_items": 5,
        "doc": "what recompute: selective recomputes (Megatron-Core recompute_modules; mlp = the dense MLP, "
               "layernorm = the norms); DeepSeek-V3: layernorm, mla_up_proj, moe_act; named with "
               "recompute: none they are recomputed (selective, as NeMo's recipes give them) and the run "
               "says so"})
    offload_activations_layers: int = field(default=0, metadata={"min": 0, "max": 100_000, "doc": (
        "layers per pipeline chunk whose saved activations go to host memory over the GPU's host link "
        "(Megatron-Core/TE activation offloading, NeMo cpu_offloading_num_layers)")})
    recompute_layers: int = field(default=0, metadata={"min": 0, "max": 100_000, "doc": (
        "fully recompute only this many layers per pipeline chunk (Megatron recompute_method block, "
        "recompute_num_layers); 0 = as training.recompute says")})
    frozen_layers: int = field(default=0, metadata={"min": 0, "max": 100_000, "doc": (
        "the first N layers (and the embedding below them) are frozen: forward only — no input or "
        "weight gradients, no recompute, no gradient all-reduce, no optimizer state; their weights "
        "stay in memory (PipeTransformer, FreezeOut: explorer/workloads/freezing.py); 0 = all train")})
    lora_rank: int = field(default=0, metadata={"min": 0, "max": 65_536, "doc": (
        "LoRA fine-tuning: rank of the low-rank adapters on every linear of each transformer layer "
        "(NeMo's default targets; 32 is its default dim); the base weights are frozen — no weight "
        "gradients, all-reduce or optimizer state for them (explorer/workloads/transformer/lora.py); "
        "below the rank at which an adapter would hold as many weights as its matrix on one GPU; not "
        "with gradient compression or ZeRO-3; 0 = every weight trains")})
    lora_targets: str = field(default="all", metadata={"choices": LORA_TARGETS, "doc": (
        "which linears carry LoRA adapters: all (NeMo 2.0's default), attention (query/key/value and "
        "output projections) or qkv (NeMo 1.0's attention_qkv; Hugging Face PEFT adapts q and v)")})
    fp8_storage: str = field(default="te", metadata={"choices": ("te", "deepseek"),
        "doc": "FP8 activation storage: te = each linear keeps its FP8 input; deepseek = also the MoE "
               "SwiGLU inputs in FP8 and the attention output once (DeepSeek-V3 Sec. 3.3.3)"})
    fp8_recipe: str | None = field(default=None, metadata=FP8_RECIPE_FIELD)
    framework: str = field(default="megatron", metadata={
        "choices": ("megatron", "deepspeed", "megatron-deepspeed", "fsdp", "fsdp2", "torchtitan"),
        "doc": "training framework: its kernels, point-to-point, buckets, gradient dtype and fp32 "
               "gradient accumulation (explorer/config/frameworks.py)"})
    sync: Sync = field(default_factory=Sync)
    phases: tuple[Phase, ...] = PHASES_FIELD              # the run's phases (config/run_plan.py, issue 38)
    total_tokens: float | None = TOTAL_TOKENS_FIELD
    critical_batch_tokens: float | None = field(default=None, metadata={
        "min": 1, "max": 1e15, "why": "a batch in tokens",
        "doc": "critical batch size in tokens (McCandlish et al. 2018): a run plan then reports its "
               "small-batch-equivalent tokens, sum of tokens / (1 + batch / this), the loss it reaches "
               "as an estimate from the literature (explorer/run/convergence.py); unset = not estimated"})


@dataclass(frozen=True)
class GPU:
    """One accelerator: peaks, memory and its default scale-up link."""

    name: str = field(default="", metadata={"doc": "display name"})
    peak_tflops: float = field(default=0.0, metadata={"required": True, **TFLOPS,
                                                      "doc": "dense bf16/fp16 peak, TFLOP/s"})
    fp8_tflops: float | None = field(default=None, metadata={**TFLOPS, "doc": "fp8 peak; default bf16"})
    memory_GB: float = field(default=0.0, metadata={
        "required": True, "min": 0.1, "max": 1e5,
        "doc": "HBM capacity as vendors quote it, GiB (80 = 85.9e9 B)",
        "why": "a B200 holds 192 GB; 0.1 GB to 100 TB per GPU"})
    hbm_GBps: float = field(default=0.0, metadata={
        "required": True, "min": 1, "max": 1e7, "doc": "HBM bandwidth, GB/s",
        "why": "a B200 streams 8,000 GB/s; up to 1e7 for an idealised GPU"})
    scale_up_GBps: float | None = field(default=None, metadata={
        **SCALE_UP_GBPS, "doc": "default scale-up bandwidth per direction, GB/s"})
    measured_matmul_tflops: float | None = field(default=None, metadata={
        **TFLOPS, "doc": "largest-GEMM throughput measured, TFLOP/s"})
    nvlink_sharp: bool = field(default=False, metadata={"doc": "NVSwitch reduces in the switch (NVLS)"})
    measured_fp8_matmul_tflops: float | None = field(default=None, metadata={**TFLOPS, "doc": "fp8 GEMM"})
    fp32_tflops: float | None = field(default=None, metadata={**TFLOPS, "doc": (
        "peak of fp32 GEMMs and convolutions (training.dtype fp32), TFLOP/s; default half the bf16 "
        "peak (TF32 tensor cores, Ampere and later); a GPU without TF32 runs fp32 on its CUDA cores "
        "(V100: 15.7 SXM2, 14 PCIe)")})
    sms: int | None = field(default=None, metadata={"min": 1, "max": 100_000, "doc": "SMs; default 132"})
    pcie_GBps: float | None = field(default=None, metadata={
        "min": 0.1, "max": 1e5, "why": "a PCIe 4.0 x16 link carries about 25 GB/s, 5.0 x16 about 53 GB/s",
        "doc": "measured PCIe GB/s per direction between the GPU and its NICs; caps its network traffic"})
    preset: str | None = field(default=None, metadata={"derived": True})
    based_on: str | None = field(default=None, metadata={"doc": (
        "the GPU preset this mapping changes (fields it leaves out are the preset's; written when "
        "one field of a preset is set, e.g. --set hardware.gpu.power_W=1000): the architecture — host "
        "link, FP8 formats, NVLink rack, sustained clock — is that preset's, whatever the name")})
    power_W: float | None = field(default=None, metadata={
        "min": 1, "max": 1e5,
        "doc": "board power of one GPU (TDP), W, at which its measured GEMM rates hold; unset = unknown"})

    @property
    def origin(self) -> str | None:
        """The preset whose architecture this GPU has: its own, or the one its mapping changes."""
        return self.preset or self.based_on

    @property
    def capacity_bytes(self) -> float:
        """HBM capacity in bytes: vendors' "80 GB" is 80 GiB (H100 SXM: ``nvidia-smi`` 81,559 MiB, A100
        80GB 81,920 MiB), ~85.5e9-85.9e9 bytes, which the GB = 1e9 figures printed are compared against."""
        return self.memory_GB * 2.0**30


@dataclass(frozen=True)
class Hardware:
    """The GPU (a preset name or a mapping) and how close large GEMMs get to its peak."""

    gpu: GPU = field(default_factory=GPU, metadata={
        "doc": "preset name or mapping {name, peak_tflops, memory_GB, hbm_GBps}"})
    compute_efficiency: float | None = field(default=None, metadata=COMPUTE_EFFICIENCY)
    power_cap_W: float | None = field(default=None, metadata=POWER_CAP_W)


@dataclass(frozen=True)
class ScaleUp:
    """The intra-node tier (NVLink/NVSwitch or PCIe)."""

    kind: str = field(default="nvswitch", metadata={
        "choices": ("nvswitch", "nvlink-ring", "pcie"),
        "doc": "intra-node interconnect: nvswitch = non-blocking crossbar (+NVLS); nvlink-ring = "
               "neighbours only, all-to-all ~n/4 hops; pcie = 2 GPUs per switch uplink, no NVLS "
               "(topology.py)"})
    bandwidth_GBps: float | None = field(default=None, metadata={
        **SCALE_UP_GBPS, "doc": "per GPU, per direction; default from the GPU preset (on pcie its "
                                "pcie_GBps, else PCIe 5.0 x16's measured 52.8)"})
    latency_us: float = field(default=0.6, metadata={**LATENCY_US, "doc": (
        "NVLink hop latency of NCCL's LL (NCCL 2.25 tuning.cc hwLat 0.6 us); other protocols alike")})
    domain_gpus: int | None = field(default=None, metadata={"min": 1, "max": MAX_GPUS, "doc": (
        "GPUs on one NVLink fabric (GB200 NVL72: 72), a multiple of gpus_per_node: NVLink inside, the "
        "scale-out fabric between domains; default gpus_per_node or the preset's rack (config/domains.py)")})


@dataclass(frozen=True)
class ScaleOut:
    """The inter-node fabric (InfiniBand/Ethernet)."""

    kind: str = field(default="rail-optimized", metadata={"choices": ("fat-tree", "rail-optimized"),
                                                          "doc": "inter-node fabric wiring"})
    fabric: str = field(default="ib-ndr", metadata={
        "choices": FABRICS, "doc": "link technology: sets the NIC speed, latency and achievable "
                                   "fraction of line rate (explorer/data/fabrics.yaml)"})
    nic_Gbps: float | None = field(default=None, metadata={
        "min": 1, "max": 1e5, "doc": "per NIC, per direction; default from the fabric",
        "why": "from 1 GbE to 100 Tb/s; NICs ship at 400-800 Gb/s"})
    nics_per_node: int = field(default=8, metadata={"min": 1, "max": 1024, "doc": "NICs per node"})
    latency_us: float | None = field(default=None, metadata={
        **LATENCY_US, "doc": "per-message latency across the fabric; default from the fabric"})
    efficiency: float | None = field(default=None, metadata={
        "min": 0.01, "max": 1, "why": "a fraction of line rate: 1% to 100%",
        "doc": "achievable fraction of NIC line rate; default fitted per fabric"})
    sharp: bool = field(default=False, metadata={
        "doc": "switches reduce in the network (InfiniBand SHARP: NCCL's CollNet algorithms)"})
    oversubscription: float = field(default=1.0, metadata={
        "min": 1, "max": 1024, "doc": "leaf downlink:uplink ratio (1 = non-blocking)"})
    switch_radix: int = field(default=64, metadata={"min": 4, "max": 4096,
                                                    "doc": "ports per leaf switch; half face the nodes"})


@dataclass(frozen=True)
class Cluster:
    """Nodes of GPUs, the datacenters they sit in, and the three network tiers."""

    gpus_per_node: int = field(default=8, metadata={"min": 1, "max": 1024,
                                                    "doc": "GPUs sharing the scale-up domain"})
    nodes: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "nodes in the cluster"})
    datacenters: int = field(default=1, metadata={
        "min": 1, "max": 1024,
        "doc": "buildings/datacenters; nodes split evenly; or a list of {name, nodes, gpu} (sizes and "
               "GPU presets may differ: explorer/variants/hetero.py)"})
    scale_up: ScaleUp = field(default_factory=ScaleUp)
    scale_out: ScaleOut = field(default_factory=ScaleOut)
    scale_across: ScaleAcross = field(default_factory=ScaleAcross)
    stragglers: Stragglers = field(default_factory=Stragglers)
    faults: Faults = field(default_factory=Faults)
    datacenter_names: tuple[str, ...] = field(default=(), metadata={"derived": True})
    # From the list form (config/datacenters.py): each datacenter's nodes when they differ, and its
    # GPU preset when some datacenter's differs from hardware.gpu; empty = all alike.
    datacenter_nodes: tuple[int, ...] = field(default=(), metadata={"derived": True})
    datacenter_gpus: tuple[str, ...] = field(default=(), metadata={"derived": True})

    def datacenter_name(self, d: int) -> str:
        """Name of datacenter ``d``: its name in the list form, else ``dc<d>``."""
        return self.datacenter_names[d] if self.datacenter_names else f"dc{d}"

    def nodes_of(self, d: int) -> int:
        """Nodes of datacenter ``d`` (its own in the list form, else an equal share)."""
        return self.datacenter_nodes[d] if self.datacenter_nodes else self.nodes // self.datacenters

    @property
    def heterogeneous(self) -> bool:
        """Whether the datacenters differ in size or GPU type (explorer/variants/hetero.py simulates them)."""
        return bool(self.datacenter_nodes or self.datacenter_gpus)

    @property
    def gpus(self) -> int:
        """All GPUs: nodes x gpus_per_node."""
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Parallelism:
    """Parallel degrees, pipeline schedule, ZeRO stage and rank placement."""

    tp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "tensor parallel degree"})
    pp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "pipeline stages"})
    dp: int | None = field(default=None, metadata={"min": 1, "max": MAX_GPUS,
                                                   "doc": "data parallel degree; default GPUs/(tp*pp*cp)"})
    cp: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS, "doc": "context parallel degree"})
    ep: int = field(default=1, metadata={"min": 1, "max": MAX_GPUS,
                                         "doc": "expert parallel degree, carved out of dp*cp"})
    vpp: int = field(default=1, metadata={"min": 1, "max": 1024,
                                          "doc": "virtual stages per GPU (interleaved schedule)"})
    schedule: str = field(default=registry.DEFAULT, metadata={"choices": SCHEDULES,
                                                              "doc": "pipeline schedule"})
    zero: int = field(default=1, metadata={"min": 0, "max": 3,
                                           "doc": "ZeRO stage; 3 = fully sharded (FSDP)"})
    sequence_parallel: bool = field(default=False, metadata={
        "doc": "Megatron sequence parallelism (RS/AG instead of AR)"})
    order: str = field(default="tp-cp-ep-dp-pp", metadata={"doc": "rank placement, innermost first"})
    span: str = field(default="auto", metadata={
        "choices": ("auto", "dp", "pp", "dp+pp"),
        "doc": "which dimensions cross datacenters, as a placement order: auto = what order implies; "
               "dp = tp-cp-ep-pp-dp; pp and dp+pp = tp-cp-ep-dp-pp (pp: whole stages per datacenter; "
               "dp+pp: fewer stages than datacenters, each stage's DP spans several)"})
    token_slices: int = field(default=1, metadata={
        "min": 1, "max": 1024, "doc": "TeraPipe: token slices per sequence that pipeline separately"})
    stage_layers: tuple[int, ...] | None = field(default=None, metadata={
        "min": 0, "max": 100_000, "max_items": 1_048_576,
        "doc": "layers per pipeline stage; default balances each stage's time per micro-batch (compute and "
               "exposed communication; DualPipe: rank pairs, within the GPU's memory), and where that split "
               "puts more on a stage than its GPU holds, moves layers off the stages holding more "
               "micro-batches until every stage fits"})
    stage_replicas: tuple[int, ...] | None = field(default=None, metadata=STAGE_REPLICAS_FIELD)
    pipeline_layout: tuple[int, ...] | None = field(default=None, metadata={"min": 0, "max": 100_000, "doc": (
        "layers per chunk, pp*vpp entries (Megatron's pipeline layout); a 0 first/last entry = an "
        "embedding-only/loss-only stage, as Llama 3 places them"), "max_items": 1_048_576})
    ideal_pipeline: bool = field(default=False, metadata={
        "doc": "teaching: stages of equal compute time, no embedding/logits, no optimizer, free "
               "communication, so the bubble equals the schedule's closed form (memory keeps each "
               "stage's own layers)"})
    max_in_flight: int = field(default=0, metadata={"min": 0, "max": 100_000,
        "doc": "1f1b-latency and crosspipe: most micro-batches a stage holds in flight (activation "
               "memory); 0 = latency-aware 1F1B's p - s plus the extra warm-up that covers the WAN "
               "round trip",
        "why": "0 (as many as cover the round trip) up to 100,000"})
    batch_split: str = field(default="even", metadata={
        "choices": ("even", "speed"),
        "doc": "datacenters of different GPUs: even = every DP replica gets the same micro-batches (and "
               "PP stages the default layer split); speed = micro-batches per replica in proportion to its "
               "GPUs' speed, with PP across layers per stage by its GPU's speed (load-balanced)"})
    dp_kind: str = field(default="allreduce", metadata={
        "choices": DP_KINDS,
        "doc": "how data-parallel replicas agree each step: allreduce = gradient all-reduce; gossip-ring / "
               "-torus / -exponential = each replica averages its model with its neighbours on a ring, a "
               "2-D torus or an exponential graph (D-PSGD, synchronous); gossip-async = with one random "
               "ring neighbour, no barrier, each replica at its own pace (AD-PSGD); parameter-server = "
               "replicas push gradients to and pull weights from ps_servers server nodes "
               "(explorer/variants/lowcomm/decentral.py)"})
    ps_servers: int = field(default=1, metadata={
        "min": 1, "max": 1_000_000, "why": "1 up to a million server nodes",
        "doc": "parameter-server: server nodes (one NIC of the fabric's speed each) the replicas push "
               "gradients to and pull weights from"})
    gossip_peers: int = field(default=0, metadata={
        "min": 0, "max": 64, "why": "0 (every neighbour of the graph) up to 64",
        "doc": "gossip: neighbours a replica exchanges with per step; 0 = every neighbour of the graph "
               "(ring 2, torus 4, exponential log2 n); 1 on the exponential graph = one-peer "
               "exponential (a different power-of-two neighbour each step); gossip-async always averages "
               "with one (0 or 1)"})


@dataclass(frozen=True)
class Communication:
    """Collective algorithm and the overlap, bucketing and prefetch options."""

    library: str = field(default="nccl", metadata={
        "choices": algorithms.LIBRARIES,
        "doc": "collective library: nccl = NCCL's algorithms and tuning; mpi/gloo also consider "
               "halving-doubling and hierarchical"})
    algorithm: str = field(default=algorithms.AUTO, metadata={"choices": algorithms.CHOICES,
        "doc": "collective algorithm; auto = the library's choice per call (NCCL's tuning model)"})
    protocol: str = field(default="auto", metadata={
        "choices": ("auto", "LL", "LL128", "Simple"),
        "doc": "NCCL protocol; auto = NCCL's choice per call"})
    comm_sms: int | None = field(default=None, metadata=COMM_SMS_FIELD)
    moe_dispatcher: str | None = field(default=None, metadata=DISPATCHER_FIELD)
    dp_overlap: bool = field(default=True, metadata={"doc": "overlap gradient reduction with backward"})
    grad_reduce_dtype: str = field(default="auto", metadata={
        "choices": ("auto", "fp32", "bf16"),
        "doc": "dtype of the gradient reduction and, where the framework keeps one (Megatron-Core's "
               "main_grad), of the gradient buffer; auto = the framework's (Megatron: fp32 under bf16, "
               "--grad-reduce-in-bf16 = bf16, as NeMo's FP8 recipes run)"})
    bucket_MB: float | None = field(default=None, metadata={
        "min": 0.001, "max": 1e5, "why": "1 KB to 100 GB; PyTorch DDP uses 25 MB",
        "doc": "gradient bucket size; default the framework's (Megatron-Core max(40M, 1M x dp) "
               "elements, DeepSpeed 5e8 elements, PyTorch DDP 25 MB; explorer/config/frameworks.py)"})
    dp_priority: bool = field(default=False, metadata={
        "doc": "P3/ByteScheduler: reduce the first layers' buckets first; the next iteration starts on them"})
    tp_overlap: bool = field(default=False, metadata={
        "doc": "overlap TP collectives with the GEMMs beside them"})
    prefetch_layers: int = field(default=1, metadata={
        "min": 0, "max": 64, "doc": "ZeRO-3/FSDP: layers whose parameters are gathered ahead"})
    contention: bool = field(default=False, metadata={"doc": CONTENTION_DOC})
    compression: Compression = field(default_factory=Compression)


@dataclass(frozen=True)
class Scenario:
    """One training setup.  A loaded Scenario has every derived default filled and satisfies every
    rule of :mod:`explorer.config.rules`, so it is always simulable."""

    name: str = field(default="unnamed scenario", metadata={"max_len": 200, "doc": "title"})
    description: str = field(default="", metadata={"max_len": 20000, "doc": "Markdown shown to readers"})
    model: Model = field(default_factory=Model)
    training: Training = field(default_factory=Training)
    hardware: Hardware = field(default_factory=Hardware)
    cluster: Cluster = field(default_factory=Cluster)
    parallelism: Parallelism = field(default_factory=Parallelism)
    communication: Communication = field(default_factory=Communication)
    inference: Inference | None = field(default=None, metadata=INFERENCE_FIELD)
    reliability: Reliability = field(default_factory=Reliability)    # failures, checkpoints (run_plan.py)

    @property
    def gpus(self) -> int:
        """All GPUs of the cluster."""
        return self.cluster.gpus

    @property
    def sync_groups(self) -> int:
        """Groups that train apart under ``training.sync``: the datacenters, or the cluster's nodes
        in groups of ``training.sync.replica_nodes``."""
        n = self.training.sync.replica_nodes
        return self.cluster.datacenters if n == 0 else max(self.cluster.nodes // n, 1)

    @property
    def dp(self) -> int:
        """The data-parallel degree (filled at load when the file leaves it out)."""
        assert self.parallelism.dp is not None  # filled by loading.fill_defaults
        return self.parallelism.dp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration (gradient accumulation steps)."""
        return self.training.global_batch // (self.training.micro_batch * self.dp)
