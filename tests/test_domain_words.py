"""``validate`` states NVLink domains that span nodes, and why a rack GPU's domain falls short of its
rack (config/domains.domain_words).  A hunt found 80 GB200s (20 trays of 4) silently priced as two
40-GPU NVLink domains: a real deployment is one 72-GPU NVL72 rack and 8 GPUs in a second one, which
the model's equal domains cannot hold, so the largest equal tiling is taken and now said."""
from __future__ import annotations

import pytest

from explorer.cli import main

GB200 = ["--set", "hardware.gpu=gb200", "--set", "model.preset=llama3-8b", "--set", "parallelism.tp=4",
         "--set", "parallelism.pp=1", "--set", "parallelism.dp=null", "--set", "training.micro_batch=1"]


@pytest.mark.parametrize("nodes,said", [
    (20, "; NVLink domains of 40 GPUs (80 GPUs per datacenter do not tile whole 72-GPU racks: the "
         "largest whole number of 4-GPU nodes up to 72 that tiles them; cluster.scale_up.domain_gpus "
         "says otherwise)"),
    (36, "; NVLink domains of 72 GPUs"),
    (10, "; NVLink domains of 40 GPUs"),         # a cluster smaller than a rack: all of it on NVLink
    # (a re-check: 76 GB200s have only their 4-GPU trays on NVLink, and validate said nothing)
    (19, "; NVLink domains of 4 GPUs (76 GPUs per datacenter do not tile whole 72-GPU racks: the "
         "largest whole number of 4-GPU nodes up to 72 that tiles them; cluster.scale_up.domain_gpus "
         "says otherwise)"),
])
def test_validate_states_the_nvlink_domain(capsys, nodes, said):
    args = ["validate", "teaching-8gpu", *GB200, "--set", f"cluster.nodes={nodes}",
            "--set", "cluster.gpus_per_node=4", "--set", f"training.global_batch={4 * nodes}"]
    assert main(args) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith(said), out


def test_a_domain_that_is_the_node_is_not_mentioned(capsys):
    assert main(["validate", "teaching-8gpu"]) == 0
    assert "NVLink domain" not in capsys.readouterr().out


def test_a_domain_set_smaller_by_hand_is_not_blamed_on_the_racks(capsys):
    """A re-check: 144 GB200s with domain_gpus 36 said "144 GPUs do not tile whole 72-GPU racks"."""
    args = ["validate", "teaching-8gpu", *GB200, "--set", "cluster.nodes=36", "--set",
            "cluster.gpus_per_node=4", "--set", "training.global_batch=144", "--set",
            "cluster.scale_up.domain_gpus=36"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip().endswith("; NVLink domains of 36 GPUs")
