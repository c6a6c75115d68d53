"""GNN training (issue 36, item 2): the closed forms of the gnn dimension's bytes as the CLI reports
them (a halo exchange moves boundary nodes x layer-input width x bytes per layer and pass; a
mini-batch fetches sampled input nodes x (1 - local share) x (1 - cache hit) x features x bytes),
the sampled frontier's occupancy formula, what the family refuses (one-line errors, exit 2), and
that a faster network shortens the exposed gnn time."""
from __future__ import annotations

import contextlib
import io
import json
import math

import pytest

from explorer.cli import main
from explorer.config.gnn import Gnn
from explorer.scenario import from_dict
from explorer.simulate import simulate
from explorer.workloads import registry
from explorer.workloads.gnn import sampling

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"


def run_json(*sets: str, scenario=SCENARIO) -> dict:
    """``run SCENARIO --set ... --json`` through the CLI, parsed."""
    args = ["run", str(scenario), "--json"]
    for s in sets:
        args += ["--set", s]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return json.loads(out.getvalue())


def small(**gnn) -> dict:
    """GraphSAGE (3 layers: 100 -> 256 -> 256 -> 47) on 8 A100s in two nodes; ``gnn`` overrides."""
    return {"model": {"kind": "gnn", "gnn": gnn},
            "training": {"global_batch": 8 * 512, "micro_batch": 512},
            "hardware": {"gpu": "a100-80gb"},
            "cluster": {"gpus_per_node": 4, "nodes": 2}}


def test_the_remote_feature_fetch_is_frontier_times_remote_share_times_width_from_the_cli():
    """A graph so large that sampling repeats no node: hop by hop the frontier is S (1 + f), so
    1,024 seeds with fan-outs 15, 10, 5 reach 1,024 x 16 x 11 x 6 = 1,081,344 input nodes; a quarter
    local and half of the rest cached leaves 1,081,344 x 0.75 x 0.5 x 128 features x 2 bytes."""
    got = run_json("model.gnn.nodes=10000000000", "model.gnn.edges=100000000000",
                   "model.gnn.local_share=0.25", "model.gnn.cache_hit=0.5")
    want = 1024 * 16 * 11 * 6 * 0.75 * 0.5 * 128 * 2
    assert got["comm_bytes_per_gpu"]["gnn"] == pytest.approx(want, rel=1e-3)
    assert got["breakdown_s"]["gnn"] > 0 and got["samples_per_s"] == pytest.approx(
        got["tokens_per_s"], rel=1e-12)


def test_the_sampled_frontier_is_the_occupancy_expectation_capped_by_degree():
    """S' = S + (N - S)(1 - exp(-S f / N)), f capped by the average degree 2E/N (Feller, Vol. I,
    II.11): 1,000 nodes of degree 4 (2,000 edges), 100 seeds, fan-outs 10 then 3."""
    g = Gnn(nodes=1000, edges=2000, fanouts=(10, 3), layers=2)
    s1 = 100 + 900 * (1 - math.exp(-100 * 4 / 1000))
    s2 = s1 + (1000 - s1) * (1 - math.exp(-s1 * 3 / 1000))
    assert sampling.effective_fanouts(g) == (4.0, 3.0)
    assert sampling.frontiers(g, 100) == pytest.approx((100, s1, s2), rel=1e-12)
    assert sampling.frontiers(Gnn(nodes=50, edges=10_000, fanouts=(15,), layers=1), 40)[-1] <= 50


def test_a_random_partitioning_reads_every_remote_node_with_a_neighbour_in_it():
    """H = N (1 - 1/p)(1 - (1 - 1/p)^d): 1,000 nodes of degree 2 on two partitions, 500 x 3/4."""
    assert sampling.halo_nodes(Gnn(nodes=1000, edges=1000, partitions=2)) == pytest.approx(375.0)
    assert sampling.halo_nodes(Gnn(nodes=1000, edges=1000, partitions=1)) == 0.0
    assert sampling.halo_nodes(Gnn(nodes=1000, edges=1000, partitions=2, halo_nodes=7)) == 7.0


def test_the_halo_exchange_is_boundary_nodes_times_layer_width_per_layer_and_pass_from_the_cli():
    """Full graph, 10,000 halo nodes, fp32 features (100) then bf16 hidden rows (256): forward
    10,000 x (100 x 4 + 256 x 2 + 256 x 2) bytes, backward the two hidden layers' gradients again
    (the input features take none)."""
    raw = small(mode="fullgraph", halo_nodes=10_000)
    raw["training"] = {"global_batch": 8, "micro_batch": 1}
    r = simulate(from_dict(raw))
    fwd = 10_000 * (100 * 4 + 256 * 2 + 256 * 2)
    bwd = 10_000 * (256 * 2 + 256 * 2)
    assert r.comm_bytes_per_gpu["gnn"] == pytest.approx(fwd + bwd, rel=1e-12)


def test_graphsage_holds_two_matrices_and_a_bias_per_layer():
    """(100 x 256 x 2 + 256) + (256 x 256 x 2 + 256) + (256 x 47 x 2 + 47) = 206,895 parameters."""
    sc = from_dict(small())
    assert registry.workload_for(sc.model).name == "gnn"
    assert registry.get("gnn").params(sc) == 51_456 + 131_328 + 24_111
    assert sc.model.layers == 3 and sc.model.seq_len == 1 and sc.model.gnn.partitions == 8


def test_a_faster_network_shortens_the_exposed_feature_fetch():
    slow = run_json("model.gnn.local_share=0.0625")
    fast = run_json("model.gnn.local_share=0.0625", "cluster.scale_out.nic_Gbps=200")
    assert fast["comm_bytes_per_gpu"]["gnn"] == slow["comm_bytes_per_gpu"]["gnn"]
    assert fast["breakdown_s"]["gnn"] < slow["breakdown_s"]["gnn"] / 2
    assert fast["iteration_time_s"] < slow["iteration_time_s"]


@pytest.mark.parametrize("sets, field", [
    (["model.gnn.fanouts=[15,10]"], "model.gnn.fanouts"),
    (["model.gnn.cache_hit=1.5"], "model.gnn.cache_hit"),
    (["model.gnn.local_share=-0.1"], "model.gnn.local_share"),
    (["model.gnn.mode=sampled"], "model.gnn.mode"),
    (["model.gnn.train_nodes=200000000"], "model.gnn.train_nodes"),
    (["model.gnn.partitions=4"], "model.gnn.partitions"),
    (["model.gnn.feature_bytes=3"], "model.gnn.feature_bytes"),
    (["parallelism.tp=2", "parallelism.dp=8"], "parallelism.tp"),
    (["model.gnn.mode=fullgraph"], "training.global_batch"),
    # More seeds per step than training nodes (a hunt: an epoch of 0.94 s against a 1.64 s step).
    (["training.global_batch=2097152", "training.micro_batch=131072"], "training.global_batch"),
    (["model.gnn.nodes=10", "model.gnn.edges=5000", "model.gnn.train_nodes=10"], "training.global_batch"),
    (["model.hidden=512"], "model.hidden"),
])
def test_bad_gnn_values_are_one_line_errors_naming_the_field(sets, field, capsys):
    args = ["run", str(SCENARIO)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err


def test_model_kind_gnn_alone_is_graphsage_on_ogbn_products():
    sc = from_dict({"model": {"kind": "gnn"}, "training": {"global_batch": 1024, "micro_batch": 1024},
                    "cluster": {"gpus_per_node": 1, "nodes": 1}})
    g = sc.model.gnn
    assert (g.nodes, g.edges, g.features, g.classes) == (2_449_029, 61_859_140, 100, 47)
    assert registry.nouns(sc.model).per_second == "seed nodes"


def test_a_sweep_over_a_gnn_field_prices_each_row_as_run_does():
    """The sweep's row pricing asks the network for the gnn group's size (pricing/keys.RowNetwork):
    the dimension spans the dp group (Dimension.group), which Network.members resolved only for
    group shapes — the sweep ended in "internal error (KeyError): 'gnn'" (and 'emb' for dlrm)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["sweep", str(SCENARIO), "--vary", "model.gnn.cache_hit=0,0.9", "--set",
                     "model.gnn.local_share=0.0625", "--json", "--workers", "1"]) == 0
    rows = json.loads(out.getvalue())
    for row, hit in zip(rows, (0, 0.9), strict=True):
        want = run_json("model.gnn.local_share=0.0625", f"model.gnn.cache_hit={hit}")["iteration_time_s"]
        assert row["iteration_time_s"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("preset, figures", [
    ("graphsage-products", (2_449_029, 61_859_140, 100, 47, 196_615)),
    ("graphsage-papers100m", (111_059_956, 1_615_685_872, 128, 172, 1_207_179)),
])
def test_the_presets_are_the_ogb_graphs(preset, figures):
    """Hu et al., "Open Graph Benchmark", NeurIPS 2020, Table 2 (nodes, edges) and the datasets'
    features, classes and training splits; average degree 50.5 and 29.1 as the OGB paper lists."""
    sc = from_dict({"model": {"preset": preset}, "training": {"global_batch": 1024, "micro_batch": 1024},
                    "cluster": {"gpus_per_node": 1, "nodes": 1}})
    g = sc.model.gnn
    assert (g.nodes, g.edges, g.features, g.classes, g.train_nodes) == figures
    assert round(g.average_degree, 1) == {"graphsage-products": 50.5, "graphsage-papers100m": 29.1}[preset]
    assert g.fanouts == (15, 10, 5) and (g.layers, g.hidden) == (3, 256)


def test_a_mini_batch_step_takes_at_most_every_training_node_and_an_epoch_at_least_one_step(capsys):
    """papers100M has 1,207,179 training nodes: 2,097,152 seeds per step is refused naming the field
    and the limit; 1,207,168 (75,448 per GPU) is an epoch of 1,207,179 / 1,207,168 steps."""
    assert main(["run", str(SCENARIO), "--set", "training.global_batch=2097152",
                 "--set", "training.micro_batch=131072"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: training.global_batch: 2097152 seed nodes per step is more than "
                   "model.gnn.train_nodes = 1207179: a mini-batch step's seeds are training nodes; "
                   "at most 1207179")
    j = run_json("training.global_batch=1207168", "training.micro_batch=75448")
    assert j["epoch_s"] == pytest.approx(j["iteration_time_s"] * 1_207_179 / 1_207_168, rel=1e-12)
    assert j["epoch_s"] >= j["iteration_time_s"]
    # Full-graph: global_batch is the partitions (16), an epoch one pass, whatever train_nodes is.
    full = run_json("model.gnn.mode=fullgraph", "training.global_batch=16", "training.micro_batch=1",
                    "model.gnn.train_nodes=5")
    assert full["epoch_s"] == pytest.approx(full["iteration_time_s"], rel=1e-12)
