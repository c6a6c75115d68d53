"""Serving physics (issue 37, Done-when): a decode step is never faster than reading the weights and
the KV cache once from HBM; TPOT grows with TP across nodes once all-reduce latency dominates; the
KV cache's bytes follow layers x kv_heads x head_dim x 2 x bytes x tokens (MLA: its latent); the
run --json contract; one-line errors."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.config import shipped_scenarios
from explorer.scenario import ScenarioError, load, load_raw
from explorer.serving.load import serve
from explorer.serving.memory import kv_bytes_per_token, kv_bytes_per_token_gpu, serving_memory
from explorer.simulate import simulate

LLAMA = shipped_scenarios()["serve-llama3-70b-tp8"]
DEEPSEEK = shipped_scenarios()["serve-deepseek-v3-disaggregated"]
CONTRACT = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "requests_per_s", "kv_cache_GB", "max_batch")


def llama(**ov):
    return load(LLAMA, ov)


# --- KV-cache bytes: closed forms ------------------------------------------------------------------

def test_kv_bytes_per_token_gqa_is_layers_kv_heads_head_dim_two_bytes():
    m = llama().model                        # Llama 3 70B: 80 layers, 8 KV heads of 128
    assert kv_bytes_per_token(m, "bf16") == 80 * 8 * 128 * 2 * 2 == 327_680
    assert kv_bytes_per_token(m, "fp8") == 80 * 8 * 128 * 2 * 1
    # TP splits the KV heads; beyond 8 ranks each keeps one (vLLM replicates them).
    assert kv_bytes_per_token_gpu(m, "bf16", 8, 1) == 80 * 1 * 128 * 2 * 2
    assert kv_bytes_per_token_gpu(m, "bf16", 16, 1) == 80 * 1 * 128 * 2 * 2
    assert kv_bytes_per_token_gpu(m, "bf16", 4, 2) == 40 * 2 * 128 * 2 * 2


def test_kv_bytes_per_token_mla_is_its_latent_and_rope_key():
    m = load(DEEPSEEK).model                 # DeepSeek-V3: 61 layers, kv_lora_rank 512, rope 64
    assert kv_bytes_per_token(m, "bf16") == 61 * (512 + 64) * 2 == 70_272
    # The latent is shared by the heads: every TP rank keeps it whole.
    assert kv_bytes_per_token_gpu(m, "bf16", 4, 1) == 70_272


def test_kv_cache_GB_is_the_batch_at_full_context():
    r = simulate(llama())
    inf = r.scenario.inference
    assert r.inference["kv_cache_GB"] == pytest.approx(
        inf.batch * (inf.prompt_tokens + inf.output_tokens) * 80 * 1 * 128 * 2 * 1 / 1e9)


def test_max_batch_is_the_kv_budget_left_beside_weights_and_workspace():
    sc = llama()
    mem = serving_memory(sc, 8, 1, 1, 1000 + 256)
    per_seq = mem.kv_per_token * 2000
    assert mem.max_batch == int((mem.usable - mem.weights - mem.workspace) // per_seq)
    assert mem.weights == pytest.approx(70.55e9 / 8, rel=0.01)    # Llama 3 70B in FP8 over 8 GPUs
    # A batch beyond it is a memory warning naming the field.
    r = simulate(llama(**{"inference.batch": mem.max_batch + 1}))
    assert r.memory_over_capacity and "inference.batch" in r.warnings[0]


# --- the roofline floor --------------------------------------------------------------------------

CASES = [{}, {"inference.batch": 1}, {"inference.batch": 1024, "inference.kv_dtype": "bf16"},
         {"inference.weight_dtype": "bf16", "inference.activation_dtype": "bf16"},
         {"cluster.nodes": 2, "parallelism.tp": 16, "inference.batch": 4},
         {"parallelism.tp": 2, "inference.prompt_tokens": 8000}]


@pytest.mark.parametrize("ov", CASES, ids=range(len(CASES)))
def test_a_decode_step_is_never_faster_than_reading_weights_and_kv_once(ov):
    sc = llama(**ov)
    sv = serve(sc)
    inf = sc.inference
    p = sc.parallelism
    context = inf.prompt_tokens + inf.output_tokens / 2
    kv = kv_bytes_per_token_gpu(sc.model, inf.kv_dtype, p.tp, p.pp)
    read = sv.memory.weights + inf.batch * context * kv
    floor = read / (sc.hardware.gpu.hbm_GBps * 1e9)           # the data sheet's bandwidth, not derated
    assert sv.step_s >= floor
    assert sv.step_s < 40 * floor                              # and not absurdly above it


def test_the_decode_floor_holds_for_moe_decode_pools():
    sv = serve(load(DEEPSEEK))
    assert sv.step_s >= sv.memory.weights / (load(DEEPSEEK).hardware.gpu.hbm_GBps * 1e9)


# --- TP across nodes ----------------------------------------------------------------------------

def test_tpot_grows_with_tp_across_nodes_once_all_reduce_latency_dominates():
    small = {"inference.batch": 8}
    one = simulate(llama(**small))
    two = simulate(llama(**small, **{"cluster.nodes": 2, "parallelism.tp": 16}))
    four = simulate(llama(**small, **{"cluster.nodes": 4, "parallelism.tp": 32}))
    assert one.inference["tpot_s"] < two.inference["tpot_s"] < four.inference["tpot_s"]
    # ... although each GPU reads less of the weights: the all-reduces' latency is what grows.
    assert two.inference["weights_GB"] < one.inference["weights_GB"]
    assert "TP all-reduce latency across 2 nodes" in two.inference["bottleneck"]
    assert two.inference["decode_step_breakdown_s"]["tp"] > one.inference["decode_step_breakdown_s"]["tp"]


def test_tp_inside_a_node_speeds_a_small_decode_batch():
    step = {tp: serve(llama(**{"parallelism.tp": tp, "inference.batch": 8})).step_s for tp in (2, 4, 8)}
    assert step[2] > step[4] > step[8]


# --- disaggregation -----------------------------------------------------------------------------

def test_disaggregated_tpot_has_no_prefill_interference_and_kv_crosses_per_request():
    """No prefill stalls a disaggregated decode batch; the KV transfer does lengthen a request's
    first inter-token gap, amortised over its output tokens as a co-located prefill's stall is."""
    sc = load(DEEPSEEK)
    sv = serve(sc)
    assert sv.tpot_s == pytest.approx(sv.step_s + sv.kv_transfer_s / sc.inference.output_tokens, rel=1e-12)
    slow = serve(load(DEEPSEEK, {"inference.disaggregated.kv_transfer_GBps": 0.1}))
    assert slow.kv_transfer_s > 400 * sv.kv_transfer_s and slow.tpot_s > sv.tpot_s
    assert slow.step_s == sv.step_s and slow.ttft_s == sv.ttft_s
    assert sv.kv_transfer_bytes == sc.inference.prompt_tokens * 70_272
    co = serve(llama())
    assert co.tpot_s > co.step_s                   # co-located: each newcomer's prefill stalls the batch
    assert co.tpot_s == pytest.approx(co.step_s + 256 * co.ttft_s / 1000)


def test_the_timeline_draws_the_prefill_the_kv_transfer_and_the_decode_window():
    r = simulate(load(DEEPSEEK))
    rows = r.timeline.rows()
    details = {row["detail"] for row in rows}
    assert "KV cache prefill → decode" in details
    assert {"prefill", "decode step 1", "decode step 4"} <= details
    assert {row["lane"] for row in rows} >= {"compute", "ep", "pp"}
    assert [c.name for c in r.classes] == ["prefill stage 0", "decode stage 0"]


# --- run --json and the text --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["serve-llama3-70b-tp8", "serve-deepseek-v3-disaggregated"])
def test_run_json_has_the_inference_contract(name, capsys):
    assert main(["run", name, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert all(j["inference"][k] > 0 for k in CONTRACT)
    assert isinstance(j["inference"]["max_batch"], int)
    assert j["iteration_time_s"] == j["inference"]["decode_step_s"]
    output = load(shipped_scenarios()[name]).inference.output_tokens
    assert j["tokens_per_s"] == pytest.approx(j["inference"]["requests_per_s"] * output)


def test_run_text_shows_ttft_tpot_tokens_and_the_bottleneck(capsys):
    assert main(["run", "serve-llama3-70b-tp8", "--set", "inference.batch=8"]) == 0
    out = capsys.readouterr().out
    for word in ("TTFT", "TPOT", "output tokens/s/GPU", "requests/s", "max batch"):
        assert word in out
    assert "bottleneck: decode step" in out and "% in TP all-reduce latency within one node" in out


# --- one-line errors (exit 2) -------------------------------------------------------------------

@pytest.mark.parametrize("args,field", [
    (["--set", "training.dtype=fp8"], "training.dtype"),
    (["--set", "training.global_batch=100000000"], "training.global_batch"),
    (["--set", "parallelism.cp=2"], "parallelism.cp"),
    (["--set", "inference.batch=0"], "inference.batch"),
    (["--set", "inference.kv_dtype=int3"], "inference.kv_dtype"),
    (["--set", "inference.disaggregated.decode.replicas=300"], "inference.disaggregated.decode"),
    (["--set", "inference.disaggregated.decode.ep=100"], "inference.disaggregated.decode"),
    (["--set", "cluster.nodes=10"], "inference.disaggregated"),
])
def test_bad_serving_input_is_one_line_naming_the_field(args, field, capsys):
    dense = args[1].startswith(("training", "parallelism", "inference.batch", "inference.kv"))
    name = "serve-llama3-70b-tp8" if dense else "serve-deepseek-v3-disaggregated"
    assert main(["run", name, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {field}") and "\n" not in err


@pytest.mark.parametrize("args", [["search", "serve-llama3-70b-tp8", "--gpus", "8"],
                                  ["sweep", "serve-llama3-70b-tp8", "--vary", "inference.batch=8,64"],
                                  ["consensus", "serve-llama3-70b-tp8"]], ids=lambda a: a[0])
def test_the_estimators_tools_refuse_a_serving_scenario(args, capsys):
    """The estimator prices a training step: on a serving file sweep printed 1.09 s and 202 GB."""
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: inference:") and "\n" not in err


@pytest.mark.parametrize("mode", ["weak", "strong"])
def test_scaling_refuses_a_serving_scenario_as_the_estimators_tools_do(mode, capsys):
    """scaling grows a training step's dp and global batch: on a serving file it printed batches
    1..8 and 1,024 tokens/GPU, the same rows weak and strong."""
    assert main(["scaling", "serve-llama3-70b-tp8", "--mode", mode]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: inference: scaling studies training steps") and "\n" not in err
    assert "sweep --full" in err


def test_a_serving_scenario_accepts_only_the_global_batch_its_loader_sets():
    """The loader sets training.global_batch to dp (one sequence per replica) and reads it no
    further: that value written back loads, any other is refused naming the field."""
    sc = llama(**{"parallelism.tp": 2})
    assert sc.dp == 4 and sc.training.global_batch == 4
    assert llama(**{"parallelism.tp": 2, "training.global_batch": 4}).training.global_batch == 4
    with pytest.raises(ScenarioError) as exc:
        llama(**{"parallelism.tp": 2, "training.global_batch": 1})
    assert exc.value.field == "training.global_batch" and "dp = 4" in str(exc.value)


def test_diff_describes_a_serving_layout_in_serving_terms(capsys):
    """diff's layout line named 1f1b, ZeRO 1 and micro-batches, fields a serving scenario refuses;
    it now says what run says: each replica's degrees, the replicas and the batch."""
    assert main(["diff", "serve-llama3-70b-tp8", "--set-b", "parallelism.tp=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("   8 x H100 SXM · serving: tp 8 · pp 1 · ep 1 · 1 replica, prefill and decode "
                        "co-located; batch 256 per replica")
    assert lines[3] == ("   8 x H100 SXM · serving: tp 2 · pp 1 · ep 1 · 4 replicas, prefill and decode "
                        "co-located; batch 256 per replica")
    assert not any(w in "\n".join(lines[:4]) for w in ("1f1b", "ZeRO", "micro-batches", "vpp"))
    assert main(["diff", "serve-deepseek-v3-disaggregated", "--set-b", "inference.arrival_rate=5"]) == 0
    b = capsys.readouterr().out.splitlines()[3]
    assert b.endswith("decode 128 GPUs (tp 1 · pp 1 · ep 128 · 128 replicas); at most 88 decoding per "
                      "replica, arriving at 5/s")


def test_a_pipelined_decode_step_counts_each_micro_batch_pass_on_the_gpu():
    """With pp stages a decode GPU runs one pass per micro-batch in flight: the step's breakdown is
    those passes (not "50 % waiting in the pipeline" for pp 2) and sums to the step."""
    r = simulate(llama(**{"parallelism.pp": 2, "parallelism.tp": 4}))
    b = r.inference["decode_step_breakdown_s"]
    assert sum(b.values()) == pytest.approx(r.inference["decode_step_s"], rel=1e-9)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert "pipeline" not in r.inference["bottleneck"]
    assert r.inference["bottleneck"].split(": ")[1].startswith("44 % in the GEMMs")


def test_the_apps_gantt_spans_the_prefill_not_just_one_decode_step():
    """The Gantt's time axis covers the drawn prefill, KV transfer and decode window (the first
    version clipped it to iteration_time_s, one decode step, hiding the 0.48 s prefill)."""
    from explorer.ui.cache import view_data
    raw = load_raw(DEEPSEEK)
    vd = view_data(json.dumps(raw, sort_keys=True))
    end = max(t.end for t in simulate(load(DEEPSEEK)).tasks)
    assert vd.gantt.layout.xaxis.range[1] >= end * 1e3 > 0.48e3


def test_validate_describes_a_serving_deployment(capsys):
    assert main(["validate", "serve-deepseek-v3-disaggregated"]) == 0
    out = capsys.readouterr().out
    assert "serving on 192 GPUs (prefill 64 GPUs, decode 128 GPUs); batch 88" in out
    assert "micro-batch" not in out


def test_the_batch_curve_rises_in_throughput_and_latency_and_marks_its_knee():
    f = simulate(llama()).inference
    pts = f["batch_curve"]
    assert [p["batch"] for p in pts] == [2 ** i for i in range(len(pts))]
    assert pts[-1]["batch"] <= f["max_batch"]
    assert all(a["tpot_s"] <= b["tpot_s"] for a, b in zip(pts, pts[1:], strict=False))
    assert all(a["output_tokens_per_s_per_gpu"] < b["output_tokens_per_s_per_gpu"]
               for a, b in zip(pts, pts[1:], strict=False))
    # The knee: every doubling up to it grew TPOT by at most sqrt(2), the next one by more.
    k = [p["batch"] for p in pts].index(f["knee_batch"])
    assert all(b["tpot_s"] <= 2 ** 0.5 * a["tpot_s"] for a, b in zip(pts[:k], pts[1:k + 1], strict=False))
    assert pts[k + 1]["tpot_s"] > 2 ** 0.5 * pts[k]["tpot_s"]
    assert f["knee_batch"] == 128
    # The configured batch's point is the run itself.
    at = next(p for p in pts if p["batch"] == 256)
    assert at["tpot_s"] == pytest.approx(f["tpot_s"], rel=1e-12)


@pytest.mark.parametrize("act", ["fp8", "bf16"])
def test_a_faster_bf16_gemm_never_slows_a_deployment(act):
    """The attention core runs at bf16's in-training efficiency whatever the GEMMs' precision: with
    fp8 activations it was handed the fp8 GEMMs' efficiency, which physics/attention.py divides by
    bf16's measured share of peak, so raising the bf16 GEMM rate slowed it (a hunt: TTFT 34.61 ->
    34.88 ms and TPOT 26.40 -> 26.47 ms from 400 to 989 TFLOP/s).  fp8 serving does not read the
    bf16 rate now; bf16 serving speeds up with it."""
    path = shipped_scenarios()["serve-llama3-70b-tp8"]
    over = [{"inference.activation_dtype": act, "hardware.gpu.measured_matmul_tflops": x}
            for x in (400, 795, 989)]
    runs = [simulate(load(path, o)).inference for o in over]
    ttft, tpot = [r["ttft_s"] for r in runs], [r["tpot_s"] for r in runs]
    assert ttft[0] >= ttft[1] >= ttft[2] and tpot[0] >= tpot[1] >= tpot[2]
    if act == "bf16":
        assert ttft[0] > 1.5 * ttft[2]
    else:
        assert ttft[0] == ttft[2] and tpot[0] == tpot[2]


def test_the_busiest_expert_rank_paces_a_serving_step():
    """A hunt found model.moe.imbalance, skew, max_nodes and communication.moe_dispatcher accepted
    and inert on serve-deepseek-v3-disaggregated.  As in training, the busiest expert rank now sets
    the pace: imbalance 2 doubles every EP all-to-all (30.3 -> 60.7 ms of the decode step) and
    brings twice the routed pairs to its experts (GEMMs 11.2 -> 14.4 ms: weights read once, more
    rows); a Zipf skew concentrates the load further; node-limited routing moves no bytes in the
    per-copy all-to-all serving prices; the dispatcher (DeepEP's deduplication, not modelled for
    serving) is refused by name."""
    path = shipped_scenarios()["serve-deepseek-v3-disaggregated"]
    base = simulate(load(path)).inference["decode_step_breakdown_s"]
    two = simulate(load(path, {"model.moe.imbalance": 2.0})).inference["decode_step_breakdown_s"]
    assert two["ep"] == pytest.approx(2 * base["ep"], rel=1e-12)
    assert base["gemm"] < two["gemm"] < 2 * base["gemm"] and two["attention"] == base["attention"]
    tpot = [simulate(load(path, {"model.moe.skew": s})).inference["tpot_s"] for s in (0.0, 0.25, 0.5)]
    assert tpot[0] < tpot[1] < tpot[2]
    assert simulate(load(path, {"model.moe.max_nodes": 1})).inference["tpot_s"] == tpot[0]
    with pytest.raises(ScenarioError) as e:
        load(path, {"communication.moe_dispatcher": "deepep"})
    assert e.value.field == "communication.moe_dispatcher"
