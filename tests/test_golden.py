"""The shipped scenarios' ``run --json`` output is stable (issue 9): a refactor must not move a
number.  The golden files were generated with ``python -m explorer run NAME --json`` before the
architecture work and regenerated once for issue 10's model change (NCCL's tuning model, GEMMs
by shape, FP8, MLA/MTP, activations per architecture, framework profiles) and again for its second
part (Megatron's fp32 gradient-accumulation epilogue with the refit GEMM fraction, DeepSpeed's
unscattered pipeline sends, NCCL's multi-node channels and two-node tree); deepseek-v3 once more
when gradient buckets overlapping the backward took communication.comm_sms from it
(taskgraph/techniques/dp_contention.py: 15.599 -> 15.613 s); and all of them when one-node
nccl-tests curves showed the chunk pipeline's fill over NVLink (nccl_tuning.node_fill_s) and the GEMM
fraction was refitted with it (0.90 -> 0.92), NVLS-tree across nodes took NCCL's tuning-model rate
and RoCE became two presets (iteration times moved by -3 % to +3.5 %: deepseek-v3 15.613 -> 15.398 s,
llama3-405b-16k 7.236 -> 7.162 s); six once more when one-pass collectives (all-gather, reduce-scatter,
all-to-all) inside a node filled half of an all-reduce's pipeline (nccl_tuning.fill_hops: -0.2 % to -0.8 %,
llama3-405b-16k 7.162 -> 7.141 s); eleven when point-to-point calls across nodes (send/recv,
all-to-all) took the proxies' hand-off (nccl_tuning.P2P_NET_US: +0.001 % to +0.06 %); three
(cross-region-pp, mixed-generations, two-datacenters) when the layer split weighed each layer's
exposed communication as well as its kernels (issue 32, taskgraph/split_cost.py: Llama 3 70B's TP
all-reduces made the output layer lighter than a layer, the splits became uniform; cross-region-pp
5.511 -> 5.348 s, the two others -0.04 %); all of them for issue 34's fidelity work (iteration times
-3.6 % to +11 %: element-wise backward traffic counted kernel by kernel, -2.7 % for megatron-gpt3-175b;
the attention kernel each framework runs with its sequence-length curve and ring attention's
per-step kernels, long-context-cp 6.343 -> 7.043 s; DeepEP dispatch, ragged expert tiles and the
blockwise FP8 recipe DeepSeek-V3 trained with, deepseek-v3 15.401 -> 15.825 s; NCCL's SMs under
FSDP; B200's sustained clock; NCCL communicator buffers in memory; the expected_error keys are
left out of the files, as they follow the regenerated error bands); deepseek-v3 once more when the
blockwise FP8 recipe's weight copies and block scales were counted in memory (config/fp8_recipes.py,
taskgraph/techniques/fp8_memory.py: params 9.87 -> 15.83 GB, total 76.5 -> 82.5 GB, time unchanged) and when
DualPipe's two weight copies summed their gradients (taskgraph/techniques/pair_sync.py: 15.825 ->
15.846 s); pipedream-vgg16 was added with issue 36 (written like the others, without the
expected_error keys and without ``samples_per_s``, the key issue 36 added to every run --json:
added keys are allowed, so no other file changed); campus-4-buildings and megatron-gpt3-175b when NCCL's
one-GPU-per-node discounts (tuning.cc: ring LL128 0.7, the tree's TREE pattern 0.85; their data-parallel
groups hold one GPU per node) entered the multi-node price and its per-channel caps took the channels a call
runs on (nccl_tuning.run_channels): 11.394 -> 11.418 s and 29.327 -> 29.383 s (+0.2 %), no other file moved;
dlrm-dcnv2 with issue 36's
recommendation models, written the same way (breakdown_s and comm_bytes_per_gpu gained emb in every
file's run: an added key, so no other file changed);
pipedream-vgg16 once more when it ran PipeDream's
own "15-1" (parallelism.stage_replicas, taskgraph/replicas.py: 15 replicas of the convolutions,
the fully connected layers on one GPU, one 1F1B-RR round of 15 minibatches an iteration: 0.596 ->
0.146 s, 1,719 -> 6,587 images/s; samples_per_s now written, the expected_error keys still left out);
pipedream-vgg16 a third time when the Bubble card with stage replicas averaged over the GPUs, each stage
weighted by its GPUs (simulate.assemble; tests/test_bubble_replicas.py): bubble_fraction 0.361 -> 0.045
and its bubble_explanation, nothing else;
gnn-sage-papers100m with issue 36's GNN
workload, written the same way but with ``samples_per_s`` (the runs gained gnn: an added key);
pipedream-gnmt16 with issue 36's recurrent (GNMT) workload, written the same way (no other file changed);
serve-llama3-70b-tp8, serve-deepseek-v3-disaggregated and serve-3d-dram were added with issue 37 (serving
scenarios, written like the others without the expected_error keys; their ``inference`` object holds the
serving figures);
llama3-405b-pretraining was added with issue 38 (written the same way; its run_total holds the
whole run's phases);
gnn-sage-papers100m once more when the GNN's CPU sampler and host-to-GPU copy were modelled
(workloads/gnn/loader.py; pipelined as SALIENT runs them they hide under the GPU's step, so no
number moved) and run --json gained ``epoch_s``: the file gained that key only (0.951 s);
seventeen (every Megatron bf16/fp8 scenario)
when Megatron's gradient buffer was counted in fp32 (config/frameworks.py grad_buffer_in_reduce_dtype:
Megatron-Core's main_grad, 4 bytes per parameter, whole under ZeRO-1), memory only (teaching-8gpu
11.14 -> 11.95 GB, long-context-cp 50.0 -> 66.0 GB, llama3-405b-16k 77.04 -> 77.09 GB at ZeRO-2);
diloco-cross-region and streaming-diloco-1gbps moved to ZeRO-2 (92.1 GB at ZeRO-1 no longer fits;
the same reduce-scatter on the wire, times unchanged) and deepseek-v3 took its report's AdamW with
bf16 moments (``training.optimizer: adam-bf16``, 8 bytes of state): its layer split moves a layer
off each edge rank to fit the fp32 gradients (4/.../4/1 -> 3/4/.../4/2; 82.5 -> 84.2 GB), the
bubble grows and the iteration goes 15.846 -> 15.964 s; all twenty when the end-to-end fitted
GEMM fraction (0.92) gave way to the SM clock sustained under tensor-core load (physics/power.py
SUSTAINED_OVER_BURST: A100 1,305/1,410 MHz, Hopper 1,830/1,980 MHz, B200 measured), iteration times
-0.0 % to -0.6 % (llama3-405b-16k 7.148 -> 7.124 s, deepseek-v3 15.964 -> 15.916 s, megatron-gpt3-175b
29.327 -> 29.212 s; pipedream-vgg16's custom V100 takes Hopper's ratio, 0.5956 -> 0.5946 s);
and every file once more when the NCCL one-GPU-per-node discounts above and this memory and
clock work met on one branch (each file's figures are both changes together; the newer scenarios
moved with them, e.g. pipedream-vgg16 and the serving files by the sustained clock);
dlrm-dcnv2's name once shortened (its title took two lines on a 1280x720 projector and pushed the Gantt
off the screen; no number moved);
dlrm-dcnv2 once more when a dimension's ``links`` entry became its longest call instead of its first
(taskgraph/edges.first_calls): links.emb is the pooled embeddings' all-to-all (46.0 MB) instead of the
sparse ids' (11.8 MB), nothing else;
long-context-cp when a recomputed layer's working bytes stopped counting its checkpointed input
twice where the checkpoint is that input (no TP, or sequence parallelism's shard;
workloads/transformer/activations.recompute_working_bytes): memory only, one layer's input less,
66.049 -> 65.915 GB, time unchanged (the full-recompute files with TP and no SP keep a distributed
checkpoint beside the gathered input: unchanged);
gnn-sage-papers100m when training in fp32 held fp32 weights and gradients and no master copy
(taskgraph/techniques/optimizer.param_bytes, optimizer_state_bytes): params 0.57 -> 1.14 MB,
grads 0.57 -> 1.14 MB, optimizer 3.42 -> 2.28 MB, the total and the time unchanged;
llama3-405b-pretraining when a checkpoint interval stopped going below one training step
(run/goodput.goodput_of: checkpoints are taken between steps): its 128K phases 12.09 -> 12.93 s,
the run 93.92995 -> 93.92996 days;
the three serving files when the attention core of an fp8 deployment took bf16's in-training
efficiency instead of the fp8 GEMMs' (serving/step.py attn_eff; physics/attention.py divides it
by bf16's measured share, so a faster bf16 GEMM had made attention slower): TTFT -0.2 %
(serve-llama3-70b-tp8 34.73 -> 34.65 ms), serve-deepseek-v3-disaggregated's decode step 53.42 ->
52.02 ms; serve-deepseek-v3-disaggregated's tpot_s (and its batch curve's) again when a
disaggregated request's KV transfer entered its first inter-token gap, amortised over its output
tokens (serving/deploy.saturated: 52.0208 -> 52.0230 ms), nothing else;
dlrm-dcnv2 when column-wise sharding sent each id to every GPU (each holds a shard of every table;
workloads/dlrm/sharding.Plan.id_owners): the ids' all-to-all buffer 11.8 -> 94.7 MB, emb bytes
90.9 -> 163.3 MB per GPU, links.emb now the ids' call; hidden by the train pipeline, so the
iteration time is unchanged (3.627 ms);
five when compression coders, model averaging and DiLoCo's outer update streamed through HBM at its
achieved rate (physics/hardware.streaming_bytes_per_s, as every other HBM-bound pass) instead of the
data sheet's: cloud-25g-dp 0.33783 -> 0.33796 s, gossip-exponential 1.64768 -> 1.64813 s,
resnet50-cloud-dp 32.905 -> 32.910 ms, the two DiLoCo scenarios +0.0002 % (their time per step);
gnn-sage-papers100m when the CPU sampler's default rate was read off SALIENT's single-GPU epoch
(16,513 ms, paced by its sampler) instead of its "Sampling + Slicing" column, which is the loop's
wait for batches (workloads/gnn/loader.py: 26.8M -> 3.85M sampled edges per thread-second): the
sampler (14.0 ms) now paces the step, run beside the GPU's whole step, all-reduce included
(analysis/steady_state.host_paced), 12.900 -> 14.020 ms, epoch_s 0.951 -> 1.033 s, and the
bottleneck names the GPU's wait for it (workload registry ``host_input``) instead of the all-reduce;
serve-3d-dram and serve-deepseek-v3-disaggregated when a served call's bytes were counted on every
tier they cross, per GPU, as a training run's traffic (serving/result._by_tier: the call's egress
per boundary) instead of its message size on its limiting tier alone: comm_bytes_by_tier and
utilisation only (3d-dram's TP ring over 8 GPUs 167.8 -> 293.6 MB on NVLink; DeepSeek's EP all-to-all
585.4 MB on the NICs -> 580.8 MB on NVLink and 548.8 MB on the NICs), times unchanged;
mixed-generations, cross-region-pp and serve-deepseek-v3-disaggregated when a call whose latency is at
least half its time was said to be limited by its outermost tier's latency (CollectiveCost.limited_by,
"scale-across latency") instead of a tier's bandwidth: links[dim].tier, and mixed-generations'
bottleneck and WAN warning sentences, only; serve-deepseek-v3-disaggregated again when a pairwise
all-to-all's latency was said to be its scale-up issue's where that is most of it (126 peers x 0.6 us:
"scale-up latency"), and mixed-generations' sentence when it said "shorten it more than bandwidth does";
pipedream-vgg16's bottleneck sentence when a largest other part under 1 % of the iteration stopped being
named a bottleneck ("Optimizer takes 0.3 %... ZeRO sharding shrinks it" beside 99.7 % of compute:
analysis/report.COMPUTE_BOUND_SHARE), nothing else;
the three serving scenarios when a serving run's samples_per_s became its requests/s (it was output
tokens/s over model.seq_len, a training field: serve-llama3-70b-tp8 1.18 -> 9.69), and
serve-deepseek-v3-disaggregated's EP traffic when the combine was counted at its own 16-bit size
instead of the FP8 dispatch's (serving/step.py: 585.4 -> 878.1 MB per step; the tiers' bytes and
utilisation with it), times unchanged, and when its decode pool's workspace stopped counting a prompt
pass it never runs (serving/deploy.py: max batch 190 -> 191, activations 25.54 -> 25.38 GB);
llama3-405b-pretraining's energy when restarts drew the GPUs' idle power instead of the training
draw (run/energy.busy_share: 17,904 -> 17,899 MWh), nothing else; the three serving scenarios' bottleneck
sentences when a call's share said what sets it (its algorithm and bus bandwidth, or the tier whose
latency it mostly is: "(ring/LL at 57 GB/s bus bandwidth)", "(mostly scale-up latency)"), nothing else;
fourteen when a point-to-point byte was counted on the tiers it crosses (network/p2p_link.py: a send to
another node leaves by the GPU's NIC, not over NVLink too): comm_bytes_by_tier's scale-up of pp (and of the
gossip and parameter-server dp exchanges) went to 0 where the pair spans nodes (megatron-gpt3-175b 1.21 GB
-> 0, pipedream-vgg16 48.2 -> 9.6 MB) with the scale-up utilisation and bytes_per_step, times unchanged;
long-context-cp when full recompute ran each layer's forward CP ring again (ring_attention.ring_cost: the
recomputed forward's K/V, (cp-1) x kv x 4 a layer): cp 45.10 -> 60.13 GB a GPU on NVLink, time unchanged
(the ring stays hidden);
the three serving scenarios when a serving pass paid the gap between dependent kernels and ran its
layers' small kernels (serving/overhead.py, vLLM's decoder layer; an FP8 linear's input quantisation
fused into the kernel before it, as vLLM and TensorRT-LLM run it): serve-llama3-70b-tp8's decode step
17.54 -> 20.12 ms, serve-3d-dram +17 %, serve-deepseek-v3-disaggregated +5.6 %;
pipedream-gnmt16 when a pipeline send across nodes with fewer NICs than GPUs took the whole NIC of the one
GPU whose flow crosses (network/p2p_flows.py, NCCL's ncclTopoGetLocalNet: 1/4 of the NIC before):
0.919 -> 0.360 s, exposed pp 505 -> 20 ms; mixed-generations when B200's attention took its measured
cuDNN curve (physics/attention_blackwell.py): the B200 replica 5.460 -> 5.470 s, its wait 2.377 ->
2.367 s, the iteration unchanged;
cross-region-pp when a pipeline hop across the WAN shared its links among the flows crossing at once
(the 32 GPUs of the stage at the cut) instead of all 128 GPUs of a region (network/p2p_flows.py):
5.352 -> 5.298 s; campus-4-buildings and diloco-cross-region when the WAN tier's utilisation was taken
as the bytes on its links over all of them, both directions (a datacenter of campus's ring has two,
of diloco's mesh three; topology.Fabric.tier_capacity_Bps): utilisation and tier_utilisation
scale-across 0.184 -> 0.092 and 0.00136 -> 0.00045, nothing else;
regenerate them only for a deliberate, explained change of the model."""
from __future__ import annotations

import json
import math

import pytest

from explorer.cli import main

from conftest import ROOT, SCENARIO_FILES

GOLDEN = ROOT / "tests" / "golden"


def same(a, b, path="", abs_tol: float = 1e-12) -> list[str]:
    """Differences between golden ``a`` and current ``b`` (floats to 1e-9 relative, or ``abs_tol``
    absolute for values near zero); keys added to ``b`` since the golden file was written are
    allowed."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [f"{path}: {type(b).__name__} instead of an object"]
        return [d for k in a
                for d in (same(a[k], b[k], f"{path}.{k}", abs_tol) if k in b else [f"{path}.{k}: missing"])]
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [f"{path}: {b!r:.80} != {a!r:.80}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in same(x, y, f"{path}[{i}]", abs_tol)]
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9, abs_tol=abs_tol)
        return [] if ok else [f"{path}: {b!r} != {a!r}"]
    return [] if a == b else [f"{path}: {b!r:.80} != {a!r:.80}"]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_run_json_matches_the_golden_file(path, capsys):
    assert main(["run", path.stem, "--json"]) == 0
    current = json.loads(capsys.readouterr().out)
    golden = json.loads((GOLDEN / f"{path.stem}.json").read_text(encoding="utf-8"))
    assert same(golden, current) == []
