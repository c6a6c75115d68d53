"""GNMT-style LSTM models (issue 36, item 3; explorer/workloads/rnn/, explorer/config/rnn.py):
closed forms of an LSTM's parameters and FLOPs (torch.nn.LSTM: 4h (input + h) weights and two 4h
bias vectors; 2 x 4h x (input + h) FLOPs per token and step), the whole model's parameter count as
PipeDream's GNMT-8/GNMT-16 code builds it, the bytes a pipeline stage sends, the recurrence's small
per-step GEMMs, and the one-line refusals of what the family does not model."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.config import ScenarioError
from explorer.physics.work import Gemm
from explorer.scenario import from_dict, load
from explorer.simulate import simulate
from explorer.workloads import registry
from explorer.workloads.rnn import arch
from explorer.workloads.timing import GemmTimer

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "pipedream-gnmt16.yaml"
H, V, B, T = 1024, 32320, 64, 50          # GNMT's hidden size and vocabulary; the scenario's batch


def _lstm(inp: int, h: int = H) -> int:
    """torch.nn.LSTM's parameters, one layer, one direction: W_ih, W_hh, b_ih, b_hh."""
    return 4 * h * inp + 4 * h * h + 4 * h + 4 * h


def _small(**over) -> dict:
    """GNMT-8 on 4 A100s of one node, 2 stages x 2 replicas."""
    raw = {"model": {"kind": "rnn"}, "training": {"global_batch": 256, "micro_batch": 32, "dtype": "bf16"},
           "hardware": {"gpu": "a100-80gb"}, "cluster": {"gpus_per_node": 4, "nodes": 1},
           "parallelism": {"pp": 2, "dp": 2}}
    for k, v in over.items():
        raw[k] = {**raw[k], **v}
    return raw


def test_one_lstm_layer_closed_forms():
    assert arch.lstm_params(H, H) == 8 * H * H + 8 * H == 8_396_800
    assert arch.lstm_params(2 * H, H) == 12 * H * H + 8 * H == 12_591_104
    assert arch.lstm_flops_per_token(2 * H, H) == 2 * 4 * H * 3 * H
    assert arch.attention_params(H) == 2 * H * H + 2 * H + 1


@pytest.mark.parametrize("depth", [8, 16])
def test_gnmt_parameters_as_pipedream_builds_them(depth):
    """msr-fiddle/pipedream gnmt(_large)/gpus=1: EmuBidirLSTM(h, h), LSTM(2h, h), LSTM(h, h) x
    (side - 2); RecurrentAttention(h) (an LSTM and Bahdanau attention), LSTM(2h, h) x (side - 1);
    two Embedding(32320, 1024) and Classifier(1024, 32320)."""
    side = depth // 2
    enc = 2 * _lstm(H) + _lstm(2 * H) + (side - 2) * _lstm(H)
    dec = _lstm(H) + (2 * H * H + 2 * H + 1) + (side - 1) * _lstm(2 * H)
    want = enc + dec + 2 * V * H + H * V + V
    assert arch.build(depth, H, V).params == want
    assert want == {8: 193_766_977, 16: 277_718_593}[depth]
    sc = from_dict({"model": {"preset": f"gnmt-{depth}"}, "training": {"global_batch": 64}})
    assert registry.workload_for(sc.model).name == "rnn" and registry.get("rnn").params(sc) == want
    assert sc.model.layers == depth and sc.model.seq_len == T and sc.model.vocab == V


def test_layer_flops_are_two_times_four_h_times_input_plus_h_per_token():
    sc = load(SCENARIO)
    spec = registry.workload_spec(sc)
    assert spec.layers == 16
    enc1, enc2, enc3 = spec.kinds[0], spec.kinds[1], spec.kinds[2]
    assert enc1.fwd.gemm_flops == pytest.approx(B * T * 2 * (2 * 4 * H * 2 * H))      # two directions
    assert enc2.fwd.gemm_flops == pytest.approx(B * T * 2 * 4 * H * 3 * H)
    assert enc3.fwd.gemm_flops == pytest.approx(B * T * 2 * 4 * H * 2 * H)
    # Backward: the data and the weight gradient, each the forward's FLOPs.
    assert enc3.bwd_input.gemm_flops == enc3.bwd_weight.gemm_flops == enc3.fwd.gemm_flops
    assert [k.params for k in spec.kinds[:3]] == [2 * _lstm(H), _lstm(2 * H), _lstm(H)]


def test_the_recurrence_runs_small_gemms_one_step_at_a_time():
    """The recurrent projection is T GEMMs of b x 4h x h (each waits for h_{t-1}): slower than the
    same FLOPs as one GEMM over every step, which is how the input projection runs."""
    sc = load(SCENARIO)
    timer = GemmTimer(sc)
    step, _, _, _, _ = timer.passes([Gemm(B, 4 * H, H, fp8=False)])
    batched, _, _, _, _ = timer.passes([Gemm(B * T, 4 * H, H, fp8=False)])
    assert step.gemm_flops * T == pytest.approx(batched.gemm_flops)
    assert step.gemm_s * T > 2 * batched.gemm_s
    enc3 = registry.workload_spec(sc).kinds[2]
    inp, _, _, _, _ = timer.passes([Gemm(B * T, 4 * H, H, fp8=False)])
    assert enc3.fwd.gemm_s == pytest.approx(inp.gemm_s + T * step.gemm_s)


def test_stage_output_bytes():
    """An encoder stage sends its output (b x T x 2h after the bidirectional layer, else h) and the
    embedded target sentence (b x T x h) the attention needs; a decoder stage its output and the
    attention context (2 x b x T x h); fp16."""
    spec = registry.workload_spec(load(SCENARIO))
    assert spec.boundary_bytes(0) == B * T * (2 * H + H) * 2 == 19_660_800
    assert spec.boundary_bytes(1) == spec.boundary_bytes(7) == B * T * 2 * H * 2
    assert spec.boundary_bytes(8) == spec.boundary_bytes(12) == B * T * 2 * H * 2


def test_a_two_stage_pipeline_sends_each_micro_batch_forward_and_its_gradient_back():
    """GNMT-8 split 4 | 4 (the encoder, the decoder), no replicas: each GPU sends 2 b T h x 2 bytes
    per micro-batch (forward: the encoder's output and the embedded target; backward: their
    gradient), 8 micro-batches."""
    raw = _small(parallelism={"pp": 2, "dp": 1, "stage_layers": [4, 4]}, training={"global_batch": 256},
                 cluster={"gpus_per_node": 2})
    r = simulate(from_dict(raw))
    assert r.comm_bytes_per_gpu["pp"] == pytest.approx(8 * 2 * 32 * T * H * 2)
    assert r.comm_bytes_per_gpu["dp"] == 0.0


def test_run_json_counts_sentences_and_tokens(capsys):
    assert main(["run", str(SCENARIO), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["samples_per_s"] == pytest.approx(d["tokens_per_s"] / T)
    assert d["samples_per_s"] == pytest.approx(1024 / d["time_per_step_s"], rel=1e-9)
    assert d["comm_bytes_per_gpu"]["pp"] > 0 and d["comm_bytes_per_gpu"]["dp"] == 0


@pytest.mark.parametrize("key, value, field", [
    ("model.rnn.depth", 7, "model.rnn.depth"),
    ("model.rnn.depth", 2, "model.rnn.depth"),
    ("model.rnn.hidden", 0, "model.rnn.hidden"),
    ("model.rnn.seq_len", 0, "model.rnn.seq_len"),
    ("training.recompute", "full", "training.recompute"),
    ("training.dtype", "fp8", "training.dtype"),
    ("model.layers", 12, "model.layers"),
])
def test_bad_input_is_one_line_naming_the_field(key, value, field, capsys):
    assert main(["run", str(SCENARIO), "--set", f"{key}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_tensor_parallelism_is_refused_naming_the_field():
    with pytest.raises(ScenarioError) as info:
        from_dict(_small(parallelism={"tp": 2, "pp": 2, "dp": 1}))
    assert info.value.field == "parallelism.tp"


def test_model_kind_rnn_selects_gnmt8_and_refuses_other_sections():
    sc = from_dict({"model": {"kind": "rnn"}, "training": {"global_batch": 64}})
    assert sc.model.rnn is not None and sc.model.rnn.label == "GNMT-8" and sc.model.layers == 8
    with pytest.raises(ScenarioError) as info:
        from_dict({"model": {"kind": "rnn", "gnn": {}}, "training": {"global_batch": 64}})
    assert info.value.field == "model.gnn"
    with pytest.raises(ScenarioError) as info:
        from_dict({"model": {"kind": "cnn", "rnn": {}}, "training": {"global_batch": 64}})
    assert info.value.field == "model.kind"
