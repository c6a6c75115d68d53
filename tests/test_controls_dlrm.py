"""Direction tests for the recommendation model's fields (``model.dlrm.*``, explorer/config/dlrm.py):
each control moves the embedding exchange, the memory or the iteration the way its mechanism says.
Collected by tests/test_controls.py through ``COVERED``."""
from __future__ import annotations

from functools import cache

from explorer.scenario import load
from explorer.simulate import Result, simulate

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "dlrm-dcnv2.yaml"

COVERED = {
    "model.dlrm.tables": "test_more_tables_exchange_more_and_take_longer",
    "model.dlrm.rows": "test_more_rows_hold_more_memory",
    "model.dlrm.pooling": "test_more_pooling_sends_more_ids_and_looks_up_more",
    "model.dlrm.dim": "test_a_wider_embedding_exchanges_more",
    "model.dlrm.table_dtype": "test_fp16_tables_hold_half_the_weights",
    "model.dlrm.hot_share": "test_cached_hot_rows_shorten_the_lookups",
    "model.dlrm.sharding": "test_sharding_plans_trade_lookup_balance_for_exchange_bytes",
    "model.dlrm.dp_max_rows": "test_replicating_small_tables_moves_bytes_from_emb_to_dp",
    "model.dlrm.dense_features": "test_more_dense_features_add_bottom_mlp_flops",
    "model.dlrm.bottom_mlp": "test_wider_mlps_are_slower",
    "model.dlrm.top_mlp": "test_wider_mlps_are_slower",
    "model.dlrm.interaction": "test_dot_interaction_is_cheaper_than_cross_layers",
    "model.dlrm.cross_layers": "test_more_or_wider_cross_layers_are_slower",
    "model.dlrm.cross_rank": "test_more_or_wider_cross_layers_are_slower",
    "model.dlrm.pipeline": "test_pipelining_hides_the_forward_exchange",
}


@cache
def run(**sets) -> Result:
    return simulate(load(SCENARIO, {k.replace("__", "."): v for k, v in sets.items()}))


def _sim(overrides: dict) -> Result:
    return run(**{k.replace(".", "__"): tuple(v) if isinstance(v, list) else v for k, v in overrides.items()})


def _emb(r: Result) -> float:
    return r.comm_bytes_per_gpu["emb"]


def test_more_tables_exchange_more_and_take_longer():
    base, more = _sim({}), _sim({"model.dlrm.tables": 52})
    assert _emb(more) > 1.9 * _emb(base) and more.iteration_time_s > base.iteration_time_s


def test_more_rows_hold_more_memory():
    base, more = _sim({}), _sim({"model.dlrm.rows": [80_000_000]})
    assert more.memory.params > base.memory.params and more.memory.optimizer > base.memory.optimizer


def test_more_pooling_sends_more_ids_and_looks_up_more():
    base, more = _sim({}), _sim({"model.dlrm.pooling": [20]})        # 520 ids per sample, not 214
    assert _emb(more) > _emb(base) and more.breakdown_s["compute"] > base.breakdown_s["compute"]


def test_a_wider_embedding_exchanges_more():
    base = _sim({})
    wide = _sim({"model.dlrm.dim": 256, "model.dlrm.bottom_mlp": [512, 256, 256]})
    assert _emb(wide) > _emb(base) and wide.iteration_time_s > base.iteration_time_s


def test_fp16_tables_hold_half_the_weights():
    base, half = _sim({}), _sim({"model.dlrm.table_dtype": "fp16"})
    assert half.memory.params < base.memory.params and half.iteration_time_s < base.iteration_time_s


def test_cached_hot_rows_shorten_the_lookups():
    base, skew = _sim({}), _sim({"model.dlrm.hot_share": 0.5})
    assert skew.iteration_time_s < base.iteration_time_s and _emb(skew) == _emb(base)


def test_sharding_plans_trade_lookup_balance_for_exchange_bytes():
    col, table, row = (_sim({"model.dlrm.sharding": s}) for s in ("column_wise", "table_wise", "row_wise"))
    dp = _sim({"model.dlrm.sharding": "data_parallel"})
    assert table.iteration_time_s > col.iteration_time_s          # the 100-hot table on one GPU
    # Row-wise reduce-scatters n x the batch's partial sums; column-wise sends every id to all n GPUs
    # (each holds a shard of every table), table-wise each id to its table's one GPU.
    assert _emb(row) > _emb(col) > _emb(table)
    assert _emb(dp) == 0 and dp.comm_bytes_per_gpu["dp"] > 100 * col.comm_bytes_per_gpu["dp"]
    # On 4 nodes, table-row-wise keeps row-wise's reduce-scatter inside each node: as few bytes leave
    # a node as with table-wise (the pooled embeddings' all-to-all), far fewer than row-wise's, and
    # the hot table's lookups are cut over a node's 8 GPUs instead of waiting on one.
    four = {"cluster.nodes": 4, "parallelism.dp": 32, "training.global_batch": 4 * 55296}
    t4, r4, tr4 = (_sim({**four, "model.dlrm.sharding": s})
                   for s in ("table_wise", "row_wise", "table_row_wise"))
    out = {k: v.comm_bytes_by_tier["emb"]["scale-out"] for k, v in (("t", t4), ("r", r4), ("tr", tr4))}
    assert out["tr"] == out["t"] < out["r"] / 4
    assert tr4.iteration_time_s < t4.iteration_time_s / 2


def test_replicating_small_tables_moves_bytes_from_emb_to_dp():
    base, rep = _sim({}), _sim({"model.dlrm.dp_max_rows": 100_000})
    assert _emb(rep) < _emb(base) and rep.comm_bytes_per_gpu["dp"] > base.comm_bytes_per_gpu["dp"]


def test_more_dense_features_add_bottom_mlp_flops():
    base, more = _sim({}), _sim({"model.dlrm.dense_features": 1024})
    assert more.tflops_per_gpu * more.iteration_time_s > base.tflops_per_gpu * base.iteration_time_s


def test_wider_mlps_are_slower():
    base = _sim({})
    top = _sim({"model.dlrm.top_mlp": [4096, 4096, 512, 256, 1]})
    bottom = _sim({"model.dlrm.bottom_mlp": [2048, 1024, 128]})
    assert top.iteration_time_s > base.iteration_time_s and bottom.iteration_time_s > base.iteration_time_s


def test_dot_interaction_is_cheaper_than_cross_layers():
    assert _sim({"model.dlrm.interaction": "dot"}).iteration_time_s < _sim({}).iteration_time_s


def test_more_or_wider_cross_layers_are_slower():
    base = _sim({})
    assert _sim({"model.dlrm.cross_layers": 6}).iteration_time_s > base.iteration_time_s
    assert _sim({"model.dlrm.cross_rank": 1024}).iteration_time_s > base.iteration_time_s


def test_pipelining_hides_the_forward_exchange():
    on, off = _sim({}), _sim({"model.dlrm.pipeline": False})
    assert on.breakdown_s["emb"] < off.breakdown_s["emb"]
    assert on.iteration_time_s <= off.iteration_time_s
    assert _emb(on) == _emb(off)                                  # the same bytes, hidden


def test_a_faster_network_shortens_the_exchange():
    """Across two nodes on 100 Gb/s Ethernet the exchange crosses the NICs; 400 Gb/s shortens it."""
    two = {"cluster.nodes": 2, "parallelism.dp": 16, "training.global_batch": 110592,
           "cluster.scale_out.fabric": "eth-100", "model.dlrm.pipeline": False}
    slow, fast = _sim(two), _sim({**two, "cluster.scale_out.fabric": "roce-400"})
    assert fast.breakdown_s["emb"] < slow.breakdown_s["emb"]
    assert fast.iteration_time_s < slow.iteration_time_s
