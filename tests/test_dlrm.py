"""Recommendation models (explorer/workloads/dlrm/, model.kind dlrm): the closed-form bytes of the
embedding exchange, the tables' memory per sharding plan, the published MLPerf figure, and
one-line refusals of bad values."""
from __future__ import annotations

import json

import pytest

from explorer import simulate
from explorer.cli import main
from explorer.config.dlrm import MLPERF_POOLING, MLPERF_ROWS, Dlrm
from explorer.scenario import ScenarioError, from_dict, load
from explorer.workloads.dlrm import sharding
from explorer.workloads.registry import workload_for, workload_spec

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "dlrm-dcnv2.yaml"
GPT3 = ROOT / "scenarios" / "megatron-gpt3-175b.yaml"
B, T, D, N = 6912, 26, 128, 8           # the scenario: samples per GPU, tables, dim, GPUs
E = 2                                   # fp16 exchange


def _json(*sets: str, capsys) -> dict:
    args = ["run", str(SCENARIO), "--json"] + [a for s in sets for a in ("--set", s)]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_the_mlperf_figures_are_the_defaults():
    """mlcommons/training recommendation_v2/torchrec_dlrm/README.MD: 26 tables, 204,184,588 rows,
    214 multi-hot ids per sample, dim 128; DLRM-DCNv2 has 26.1B embedding parameters."""
    d = Dlrm()
    assert (d.tables, d.dim, d.total_rows, sum(MLPERF_POOLING)) == (26, 128, 204_184_588, 214)
    assert len(MLPERF_ROWS) == len(MLPERF_POOLING) == 26 and MLPERF_ROWS.count(40_000_000) == 5
    assert (d.bottom_mlp, d.top_mlp, d.cross_layers, d.cross_rank) == ((512, 256, 128),
                                                                      (1024, 1024, 512, 256, 1), 3, 512)
    sc = load(SCENARIO)
    assert sc.model.kind == "dlrm" and workload_for(sc.model).name == "dlrm"
    # Dense: bottom 13-512-256-128, 3 cross layers of 2 x 3456 x 512 + 3456, top 3456-...-1.
    dense = (13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128 + 3 * (2 * 3456 * 512 + 3456)
             + 3456 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 + 1)
    assert workload_for(sc.model).params(sc) == 204_184_588 * 128 + dense


def test_the_pooled_embedding_all_to_all_moves_the_closed_form_bytes(capsys):
    """Per GPU and step: the ids' all-to-all (column-wise, as shipped: every GPU holds a shard of
    every table, so each id goes to all n GPUs: a buffer of n x b x 214 ids x 8 bytes), the pooled
    embeddings' all-to-all (b x tables x dim x 2 bytes) and their gradients' back, each x (n-1)/n
    on the bus."""
    spec = workload_spec(load(SCENARIO))
    edges = {e.label: e for e in spec.kinds[0].edges}
    assert edges["pooled embeddings"].size_bytes == B * T * D * E == 46_006_272
    assert edges["pooled embeddings"].op == "all-to-all" and edges["pooled embeddings"].overlap
    grads = edges["embedding gradients"]
    assert grads.size_bytes == B * T * D * E and not grads.overlap
    assert edges["sparse ids"].size_bytes == N * B * 214 * sharding.ID_BYTES
    out = _json(capsys=capsys)
    want = (N * B * 214 * 8 + 2 * B * T * D * E) * (N - 1) / N
    assert out["comm_bytes_per_gpu"]["emb"] == pytest.approx(want, rel=1e-12)
    assert out["comm_bytes_by_tier"]["emb"]["scale-up"] == pytest.approx(want, rel=1e-12)
    assert out["breakdown_s"]["emb"] > 0 and out["links"]["emb"]["group"] == N
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["iteration_time_s"], rel=1e-12)


@pytest.mark.parametrize("plan, owners", [("column_wise", N), ("table_wise", 1), ("row_wise", 1),
                                          ("table_row_wise", 1)])
def test_each_plan_sends_an_id_to_every_gpu_that_looks_it_up(plan, owners):
    """The input dist sends a sample's id to each GPU that looks it up: one owner per id for
    table-wise (the table's GPU), row-wise and table-row-wise (the row's), all n under column-wise
    (TorchRec's CwPooledEmbeddingSharding sends a table's features to every shard's rank): the
    buffer is owners x b x 214 ids x 8 bytes, and the bytes sent per GPU (n - 1)/n of it."""
    spec = workload_spec(load(SCENARIO, {"model.dlrm.sharding": plan}))
    edges = {e.label: e for e in spec.kinds[0].edges}
    assert edges["sparse ids"].size_bytes == owners * B * 214 * sharding.ID_BYTES


def test_row_wise_reduce_scatters_the_whole_batchs_partial_sums():
    """TorchRec's row-wise output dist: a reduce-scatter whose input is n b x tables x d."""
    spec = workload_spec(load(SCENARIO, {"model.dlrm.sharding": "row_wise"}))
    edges = {e.label: e for e in spec.kinds[0].edges}
    assert edges["pooled embeddings"].op == "reduce-scatter"
    assert edges["pooled embeddings"].size_bytes == N * B * T * D * E
    assert edges["embedding gradients"].op == "all-gather"


def test_table_row_wise_reduce_scatters_in_the_node_and_exchanges_between_nodes(capsys):
    """TorchRec's table-row-wise output dist on 4 nodes of 8: a reduce-scatter inside each node of
    its partial sums for all n b samples of its quarter of the tables (n b x T/4 x d), then an
    all-to-all of b x T x d between the 4 nodes (one GPU per node at each place); gradients back
    the other way.  Bus bytes per GPU: the ids' all-to-all over 32 x 31/32, twice the
    reduce-scatter's x 7/8 and the all-to-all's x 3/4; only the ids' and the all-to-all's leave a
    node."""
    four = ["cluster.nodes=4", "parallelism.dp=32", "training.global_batch=221184",
            "model.dlrm.sharding=table_row_wise"]
    spec = workload_spec(load(SCENARIO, {"cluster.nodes": 4, "parallelism.dp": 32,
                                         "training.global_batch": 221184,
                                         "model.dlrm.sharding": "table_row_wise"}))
    edges = {e.label: e for e in spec.kinds[0].edges}
    n, nodes = 32, 4
    node = edges["pooled embeddings (node)"]
    across = edges["pooled embeddings (nodes)"]
    assert (node.dim, node.op, node.size_bytes) == ("emb_node", "reduce-scatter", n * B * T / nodes * D * E)
    assert (across.dim, across.op, across.size_bytes) == ("emb_across", "all-to-all", B * T * D * E)
    assert edges["embedding gradients (node)"].op == "all-gather"
    assert edges["embedding gradients (nodes)"].op == "all-to-all"
    out = _json(*four, capsys=capsys)
    ids = B * 214 * sharding.ID_BYTES
    want = ids * (n - 1) / n + 2 * (node.size_bytes * 7 / 8 + across.size_bytes * 3 / 4)
    assert out["comm_bytes_per_gpu"]["emb"] == pytest.approx(want, rel=1e-12)
    # What leaves a node: the ids to the 24 GPUs of other nodes, and the all-to-all's 3 of 4 parts.
    leaves = ids * 24 / 32 + 2 * across.size_bytes * 3 / 4
    assert out["comm_bytes_by_tier"]["emb"]["scale-out"] == pytest.approx(leaves, rel=1e-9)


def test_table_row_wise_holds_the_busiest_nodes_tables_over_its_gpus():
    """16 tables of 1,000 rows on 2 nodes of 8 GPUs: each node holds 8 tables, each GPU an eighth
    of their rows; on one node it is row-wise."""
    kw = {"tables": 16, "rows": [1000], "pooling": [1], "dim": 64, "bottom_mlp": [64]}
    raw = {"model": {"kind": "dlrm", "dlrm": {"sharding": "table_row_wise", **kw}},
           "training": {"global_batch": 128, "micro_batch": 8},
           "cluster": {"gpus_per_node": 8, "nodes": 2}, "parallelism": {"dp": 16}}
    lc = workload_spec(from_dict(raw)).kinds[0]
    assert (lc.held_bytes, lc.held_state_bytes) == (8000 / 8 * 64 * 4, 8000 / 8 * 4)
    assert _held("table_row_wise", **kw) == _held("row_wise", **kw)


def _held(sharding_plan: str, **dlrm) -> tuple[float, float, float]:
    raw = {"model": {"kind": "dlrm", "dlrm": {"sharding": sharding_plan, **dlrm}},
           "training": {"global_batch": 64, "micro_batch": 8},
           "cluster": {"gpus_per_node": 8, "nodes": 1}, "parallelism": {"dp": 8}}
    lc = workload_spec(from_dict(raw)).kinds[0]
    return lc.held_bytes, lc.held_state_bytes, lc.params


def test_embedding_memory_per_sharding_plan():
    """16 tables of 1,000 rows x 64 over 8 GPUs, fp32 tables, one fp32 Adagrad accumulator per
    row: table-wise holds 2 whole tables, row-wise 1/8 of every row, column-wise 8 of the 64
    columns of every row (and every row's accumulator), data-parallel replicates them as dense
    parameters (all-reduced; nothing held apart)."""
    kw = {"tables": 16, "rows": [1000], "pooling": [1], "dim": 64, "bottom_mlp": [64]}
    assert _held("table_wise", **kw) == (2000 * 64 * 4, 2000 * 4, 0.0)
    assert _held("row_wise", **kw) == (16000 / 8 * 64 * 4, 16000 / 8 * 4, 0.0)
    assert _held("column_wise", **kw) == (16000 * 8 * 4, 16000 * 4, 0.0)
    assert _held("data_parallel", **kw) == (0.0, 0.0, 16000 * 64)
    # Small tables (at most dp_max_rows rows) are replicated whatever the plan.
    assert _held("table_wise", **{**kw, "rows": [1000, 5000], "dp_max_rows": 1000}) == (
        5000 * 64 * 4, 5000 * 4, 8 * 1000 * 64)
    # fp16 tables halve the weights, not the accumulators.
    assert _held("row_wise", **kw, table_dtype="fp16") == (16000 / 8 * 64 * 2, 16000 / 8 * 4, 0.0)


def test_the_memory_report_counts_the_shards_and_their_accumulators(capsys):
    out = _json(capsys=capsys)
    rows = 204_184_588
    shard = rows * (D / N) * 4 + rows * 4            # column-wise: 16 columns + the accumulator
    assert out["memory_GB"]["params"] * 1e9 > rows * (D / N) * 4
    assert out["memory_GB"]["params"] + out["memory_GB"]["optimizer"] == pytest.approx(
        (shard + 16_049_665 * (2 + 12)) / 1e9, rel=1e-3)


def test_table_wise_waits_for_the_gpu_with_the_hottest_table():
    """Longest-processing-time placement of the MLPerf tables on 8 GPUs: the 100-hot table alone
    on one GPU is the most any GPU looks up (the balanced share would be 214 / 8 = 26.75)."""
    busy_pool, _ = sharding._table_wise_loads(Dlrm(), list(range(26)), 8)
    assert busy_pool == 100
    fast = simulate(load(SCENARIO)).iteration_time_s
    slow = simulate(load(SCENARIO, {"model.dlrm.sharding": "table_wise"})).iteration_time_s
    assert slow > 1.5 * fast


# MLPerf Training v3.0, NVIDIA, 1x DGX H100, HugeCTR (mlcommons/training_results_v3.0,
# NVIDIA/results/dgxh100_ngc23.04_merlin_hugectr/dlrm_dcnv2/result_0.txt): between the evaluations
# at epoch 0.69990 and 0.74990 (eval_stop 1683409638458 ms, eval_start 1683409652902 ms) the run
# trained 0.0499941 x 4,195,197,692 samples in 14.444 s at global batch 55,296.
PUBLISHED_SAMPLES_PER_S = 0.04999406872 * 4_195_197_692 / 14.444
TOLERANCE = 0.10                         # ours: +4.9 %


def test_the_mlperf_dgx_h100_throughput_is_reproduced_within_ten_percent(capsys):
    out = _json(capsys=capsys)
    assert PUBLISHED_SAMPLES_PER_S == pytest.approx(14.52e6, rel=1e-3)
    assert out["samples_per_s"] == pytest.approx(PUBLISHED_SAMPLES_PER_S, rel=TOLERANCE)
    assert out["samples_per_s"] == pytest.approx(55296 / out["iteration_time_s"], rel=1e-12)


# MLPerf Training v3.0, NVIDIA, 8x DGX H100, HugeCTR (mlcommons/training_results_v3.0,
# NVIDIA/results/dgxh100_n8_ngc23.04_merlin_hugectr/dlrm_dcnv2/result_0.txt): global batch 135,168;
# between the evaluations at epoch 0.64961 and 0.69958 (eval_stop 1683440178339 ms, eval_start
# 1683440182888 ms) it trained 0.0499726 x 4,195,197,692 samples in 4.549 s.  A held-out check
# (not in the reference data): HugeCTR's hybrid plan keeps the small tables' lookups inside a node,
# as table-row-wise does; column-wise sends every id to all 64 GPUs, over the NICs.
PUBLISHED_8_NODES = (0.6995843670457841 - 0.6496117537133099) * 4_195_197_692 / 4.549
EIGHT_NODES = {"cluster.nodes": 8, "parallelism.dp": 64, "training.global_batch": 135168,
               "training.micro_batch": 2112}


def test_mlperf_on_eight_dgx_h100_is_reproduced_with_a_node_local_plan():
    assert PUBLISHED_8_NODES == pytest.approx(46.08e6, rel=1e-3)
    local = simulate(load(SCENARIO, {**EIGHT_NODES, "model.dlrm.sharding": "table_row_wise"}))
    assert local.samples_per_s == pytest.approx(PUBLISHED_8_NODES, rel=TOLERANCE)      # ours +2.4 %
    # Column-wise's ids cross the NICs: the exchange sets the pace, 0.57x the published rate.
    spread = simulate(load(SCENARIO, {**EIGHT_NODES, "model.dlrm.sharding": "column_wise"}))
    assert spread.links["emb"]["tier"] == "scale-out" and local.links["emb"]["tier"] == "scale-up"
    assert spread.samples_per_s < 0.6 * PUBLISHED_8_NODES


@pytest.mark.parametrize(("key", "value", "field"), [
    ("model.dlrm.sharding", "grid_wise", "model.dlrm.sharding"),
    ("model.dlrm.hot_share", "1.5", "model.dlrm.hot_share"),
    ("model.dlrm.dim", "0", "model.dlrm.dim"),
    ("model.dlrm.bottom_mlp", "[512, 256, 64]", "model.dlrm.bottom_mlp"),
    ("model.dlrm.top_mlp", "[1024, 2]", "model.dlrm.top_mlp"),
    ("model.dlrm.interaction", "attention", "model.dlrm.interaction"),
])
def test_bad_values_are_one_line_errors_naming_the_field(key, value, field, capsys):
    assert main(["run", str(SCENARIO), "--set", f"{key}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err


@pytest.mark.parametrize("dim", ["pp", "tp", "cp"])
def test_transformer_degrees_are_refused_naming_the_degree(dim, capsys):
    """One line naming the degree and what a DLRM does instead (tp had read "does not divide
    model.heads=1", a field a DLRM does not have)."""
    assert main(["run", str(SCENARIO), "--set", f"parallelism.{dim}=2", "--set", "parallelism.dp=4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"parallelism.{dim}: 2" in err, err
    assert "trains data-parallel" in err
    assert "heads" not in err and "seq_len" not in err


def test_kind_dlrm_on_a_transformer_scenario_names_the_derived_field(capsys):
    """model.kind dlrm alone is MLPerf's DLRM-DCNv2; on a transformer scenario the transformer's
    own fields disagree with it: refused in one line naming the first."""
    assert main(["run", str(GPT3), "--set", "model.kind=dlrm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.layers" in err and "model.dlrm" in err
    raw = {"model": {"kind": "dlrm"}, "training": {"global_batch": 64, "micro_batch": 8},
           "cluster": {"gpus_per_node": 8, "nodes": 1}}
    assert from_dict(raw).model.dlrm == Dlrm()
    with pytest.raises(ScenarioError) as info:
        from_dict({**raw, "model": {"kind": "cnn", "dlrm": {}}})
    assert info.value.field == "model.kind"


def test_a_sweep_over_dlrm_fields_prices_every_row_like_run(capsys):
    """The pricing keys asked the network for the members of ``emb`` directly (KeyError 'emb':
    an internal error); the group is resolved where the members are (Network.members)."""
    assert main(["sweep", str(SCENARIO), "--vary", "model.dlrm.tables=13,26", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["valid"] for r in rows] == [True, True]
    assert rows[1]["iteration_time_s"] == pytest.approx(simulate(load(SCENARIO)).iteration_time_s, rel=1e-9)
    assert rows[0]["breakdown_s"]["emb"] < rows[1]["breakdown_s"]["emb"]
