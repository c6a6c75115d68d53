"""VGG as a convolutional network (issue 36): the layer table against torchvision's parameter and
MAC counts, each layer's cost and output bytes as closed forms, ``model.kind`` and ``run --json``'s
``samples_per_s``."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.scenario import ScenarioError, from_dict, load
from explorer.workloads.convnet import vgg, vgg_costs
from explorer.workloads.registry import workload_for, workload_spec

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "pipedream-vgg16.yaml"
GPT3 = ROOT / "scenarios" / "megatron-gpt3-175b.yaml"

# torchvision.models documentation, "Classification" table (params; GFLOPS, which torchvision counts
# as multiply-accumulates at 224 x 224): vgg11 132,863,336 / 7.61; vgg13 133,047,848 / 11.31;
# vgg16 138,357,544 / 15.47; vgg19 143,667,240 / 19.63.  Simonyan & Zisserman 2015, Table 2: 133,
# 133, 138 and 144 million parameters.
TORCHVISION = {11: (132_863_336, 7.61), 13: (133_047_848, 11.31), 16: (138_357_544, 15.47),
               19: (143_667_240, 19.63)}


@pytest.mark.parametrize("depth", sorted(TORCHVISION))
def test_vgg_parameters_and_macs_are_torchvisions(depth):
    net = vgg.build(depth)
    params, gmacs = TORCHVISION[depth]
    assert net.params == params
    assert net.forward_macs / 1e9 == pytest.approx(gmacs, abs=0.006)


def test_vgg16_has_13_convolutions_and_3_fully_connected_layers_with_their_outputs():
    """Configuration D: blocks of 2, 2, 3, 3, 3 convolutions, each closed by a 2x2/2 pool; a
    layer's output is what a stage ending with it sends (64 x 112^2 after pool1, 512 x 7^2 after
    pool5, then 4096, 4096, 1000)."""
    net = vgg.build(16)
    convs = [x for x in net.layers if not x.fc]
    assert len(convs) == 13 and len(net.layers) == 16
    out = {x.name: x.out_elements for x in net.layers}
    assert out["conv1_1"] == 64 * 224 ** 2 and out["conv1_2"] == 64 * 112 ** 2
    assert out["conv5_3"] == 512 * 7 ** 2 == 25_088
    assert (out["fc6"], out["fc7"], out["fc8"]) == (4096, 4096, 1000)
    # conv3_1: 56 x 56 positions x 256 outputs x (128 x 9) inputs.
    assert {x.name: x.macs for x in net.layers}["conv3_1"] == 56 * 56 * 256 * 128 * 9


def test_each_vgg_layer_costs_its_gemm_flops_and_sends_its_output():
    """Per micro-batch b: forward FLOPs 2 b x MACs, data and weight gradients the same each
    (conv1_1's data gradient not computed), the parameters of the layer, and out_bytes = b x
    output elements x 2 bytes (fp16)."""
    sc = load(SCENARIO)
    b = sc.training.micro_batch
    spec = workload_spec(sc)
    net = vgg.build(16)
    assert spec.layers == 16 and spec.distinct_layers
    for i, (x, lc) in enumerate(zip(net.layers, spec.kinds, strict=True)):
        assert lc.fwd.gemm_flops == pytest.approx(2 * b * x.macs)
        assert lc.bwd_weight.gemm_flops == pytest.approx(2 * b * x.macs)
        assert lc.bwd_input.gemm_flops == pytest.approx(0.0 if i == 0 else 2 * b * x.macs)
        assert lc.params == x.params
        assert lc.out_bytes == b * x.out_elements * 2
        assert spec.boundary_bytes(i) == lc.out_bytes
    # 3 passes of 2 b MACs each, but conv1_1's data gradient.
    assert spec.model_flops == pytest.approx(6 * b * net.forward_macs - 2 * b * net.layers[0].macs)
    assert workload_for(sc.model).params(sc) == 138_357_544
    # Kept activations of conv1_2: its input and ReLU output (64 x 224^2 each, 2 bytes) and the
    # pool's int64 indices (64 x 112^2).
    assert spec.kinds[1].act_bytes == b * (2 * 64 * 224 ** 2 * 2 + 64 * 112 ** 2 * vgg_costs.POOL_INDEX_BYTES)


def test_a_vgg_takes_images_not_clips():
    with pytest.raises(ScenarioError) as info:
        load(SCENARIO, {"model.conv.frames": 8})
    assert info.value.field == "model.conv.frames"


def test_model_kind_cnn_selects_the_convnet_family():
    """``kind: cnn`` alone is a ResNet-50 (the Conv defaults); a conv section implies cnn; an
    explicit transformer with a conv section is refused, naming model.kind."""
    raw = {"model": {"kind": "cnn"}, "training": {"global_batch": 64, "micro_batch": 8},
           "cluster": {"gpus_per_node": 8, "nodes": 1}}
    sc = from_dict(raw)
    assert sc.model.kind == "cnn" and sc.model.conv is not None and sc.model.conv.depth == 50
    assert workload_for(sc.model).name == "convnet"
    assert load(SCENARIO).model.kind == "cnn"
    assert load(GPT3).model.kind == "transformer" and workload_for(load(GPT3).model).name == "transformer"
    with pytest.raises(ScenarioError) as info:
        load(SCENARIO, {"model.kind": "transformer"})
    assert info.value.field == "model.kind"


def _json(path, *sets, capsys) -> dict:
    args = ["run", str(path), "--json"] + [a for s in sets for a in ("--set", s)]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_run_json_adds_samples_per_s(capsys):
    """Sequences per second for a transformer (tokens/s over seq_len, = global batch / iteration
    time), images per second for a CNN (= tokens/s, one 'token' per image)."""
    gpt = _json(GPT3, capsys=capsys)
    sc = load(GPT3)
    assert gpt["samples_per_s"] == pytest.approx(sc.training.global_batch / gpt["iteration_time_s"])
    assert gpt["samples_per_s"] == pytest.approx(gpt["tokens_per_s"] / sc.model.seq_len)
    cnn = _json(SCENARIO, capsys=capsys)
    batch = load(SCENARIO).training.global_batch         # 960: one round of PipeDream's 15-1
    assert cnn["samples_per_s"] == pytest.approx(batch / cnn["iteration_time_s"])
    assert cnn["samples_per_s"] == pytest.approx(cnn["tokens_per_s"])


def test_vgg_powersgd_factor_and_names():
    """PowerSGD rank 4 sends 4 (m + n) per weight matrix (C_out x C_in*9, FC out x in) and the
    biases whole; VGG-16's fc6 alone (4096 x 25088) compresses 4 x 29184 / 102.8M."""
    sc = load(SCENARIO)
    net = vgg.build(16)
    mats = sum(min(4 * (a + b), a * b) for a, b in net.matrices)
    biases = sum(x.c_out for x in net.layers)
    w = workload_for(sc.model)
    assert w.powersgd_factor(sc.model, 1, 4) == pytest.approx((mats + biases) / 138_357_544)
    assert w.powersgd_factor(sc.model, 1, 4) < 0.003          # 0.24 % of the bytes
    assert w.nouns(sc.model).layers == "weight layers of a VGG-16"
    assert sc.model.layers == 16 and sc.model.hidden == 4096 and sc.model.vocab == 1000
