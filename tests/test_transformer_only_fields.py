"""A transformer layer's settings on the other families, and head widths that do not exist, are
refused by name rather than accepted and ignored (found by an invariant hunt: each of these gave
byte-identical results on dlrm-dcnv2, gnn-sage-papers100m, pipedream-vgg16, pipedream-gnmt16 and
resnet50-cloud-dp; model.head_dim on DeepSeek-V3's latent attention; 4,096 heads of a 2,048 hidden
ran with heads half an element wide)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from explorer.scenario import ScenarioError, load

from conftest import ROOT

FAMILIES = ["dlrm-dcnv2", "gnn-sage-papers100m", "pipedream-vgg16", "pipedream-gnmt16", "resnet50-cloud-dp"]
SETTINGS = [("model.head_dim", 64), ("training.attention_kernel", "flash2"),
            ("training.flash_attention", False),
            ("training.recompute_modules", ["mlp"]), ("training.fp8_recipe", "current"),
            ("training.fp8_storage", "deepseek"), ("parallelism.sequence_parallel", True),
            ("communication.tp_overlap", True)]


def _load(name: str, ov: dict):
    return load(ROOT / "scenarios" / f"{name}.yaml", ov)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("key,value", SETTINGS)
def test_a_transformer_setting_on_another_family_is_refused_by_name(name, key, value):
    with pytest.raises(ScenarioError) as exc:
        _load(name, {key: value})
    assert exc.value.field == key and "\n" not in str(exc.value)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_defaults_of_those_settings_are_accepted(name):
    """Writing a setting at its default (a file that spells it out) changes nothing and loads."""
    _load(name, {"training.attention_kernel": "auto", "training.flash_attention": True,
                 "training.recompute_modules": ["core_attn"], "training.fp8_storage": "te",
                 "parallelism.sequence_parallel": False, "communication.tp_overlap": False})


def test_head_dim_on_latent_attention_is_refused():
    with pytest.raises(ScenarioError, match="model.mla") as exc:
        _load("deepseek-v3", {"model.head_dim": 256})
    assert exc.value.field == "model.head_dim"


@pytest.mark.parametrize("kv", [1, 8, 256])
def test_kv_heads_on_latent_attention_is_refused(kv):
    """A hunt: kv_heads 1 on DeepSeek-V3 loaded and changed nothing (latent attention reads its K
    and V from model.mla's kv latent for every query head)."""
    with pytest.raises(ScenarioError, match="kv_lora_rank") as exc:
        _load("deepseek-v3", {"model.kv_heads": kv})
    assert exc.value.field == "model.kv_heads"
    # Written at the value the defaults fill (heads), as a file that spells it out: accepted.
    assert _load("deepseek-v3", {"model.kv_heads": 128}).model.kv_heads == 128


def test_an_mla_model_shows_no_head_dim_or_kv_heads_box():
    """The sidebar offers neither on a latent-attention model (ui/controls.MLA_UNREAD); a dense model
    keeps both, and choosing DeepSeek-V3's preset on one hides them."""
    from app_support import run_app

    def keys(at) -> set[str]:               # number boxes and the toggles of optional ones
        toggles = {w.key.removeprefix("_on.") for w in at.sidebar.toggle}
        return {w.key for w in at.sidebar.number_input} | toggles

    at = run_app(scenario="serve-deepseek-v3-disaggregated")
    assert not {"model.head_dim", "model.kv_heads"} & keys(at)
    at = run_app(scenario="teaching-8gpu")
    assert {"model.kv_heads"} <= keys(at)
    at.sidebar.selectbox(key="model.preset").set_value("deepseek-v3").run()
    assert not at.exception
    assert not {"model.head_dim", "model.kv_heads"} & keys(at)


@pytest.mark.parametrize("heads", [7, 4096])
def test_heads_that_do_not_divide_hidden_need_a_head_dim(heads):
    with pytest.raises(ScenarioError, match="does not divide model.hidden=2048") as exc:
        _load("teaching-8gpu", {"model.heads": heads})
    assert exc.value.field == "model.heads"
    sc = _load("teaching-8gpu", {"model.heads": 8, "model.head_dim": 192, "model.kv_heads": 8})
    assert sc.model.head_dim == 192        # decoupled widths stay expressible


def test_the_cli_says_it_in_one_line_with_exit_2():
    proc = subprocess.run([sys.executable, "-m", "explorer", "run", "resnet50-cloud-dp", "--set",
                           "communication.tp_overlap=true"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "communication.tp_overlap" in proc.stderr


def test_degrees_that_do_not_divide_the_gpus_name_the_cluster_shape():
    """Found by a hunt: replacing mixed-generations' datacenter list by a count leaves cluster.nodes
    at 1, and the message spoke of "the 8 GPUs" of a 1,024-GPU scenario without saying why."""
    with pytest.raises(ScenarioError, match=r"cluster.nodes = 1 x gpus_per_node = 8") as exc:
        _load("mixed-generations", {"cluster.datacenters": 3})
    assert exc.value.field == "parallelism"
