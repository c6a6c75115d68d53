"""Pipeline schedules: program orders and the bubble closed forms of Narayanan et al. SC21."""
from __future__ import annotations

import math

import pytest

from explorer.analysis.steady_state import schedule_iteration
from explorer.scenario import from_dict
from explorer.schedules.pipeline import peak_in_flight, stage_order
from explorer.simulate import simulate
from explorer.taskgraph.partition import split_layers
from explorer.taskgraph.techniques.optimizer import grad_reduce_bytes

from conftest import pipeline_raw


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(2, 2), (4, 8), (8, 32), (4, 3)])
def test_bubble_of_gpipe_and_1f1b_is_p_minus_1_over_m_plus_p_minus_1(schedule, p, m):
    # SC21 Sec. 2.2.1: bubble fraction (p-1)/(m+p-1) when communication is free.
    r = simulate(from_dict(pipeline_raw(p, m, schedule)))
    # Within 1%: the vocabulary-8 output layer is not quite free, as its GEMMs pay whole tiles
    # (kernels.py); the schedules' formulas differ from each other by far more.
    assert r.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-2)


@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (8, 16, 4), (4, 4, 2), (2, 8, 3)])
def test_interleaving_divides_the_bubble_time_by_vpp(p, m, v):
    # SC21 Sec. 2.2.2: bubble time (p-1)(F+B)/v; as a fraction: ((p-1)/v) / (m + (p-1)/v).
    inter = simulate(from_dict(pipeline_raw(p, m, "interleaved", v)))
    assert inter.bubble_fraction == pytest.approx((p - 1) / v / (m + (p - 1) / v), rel=1e-2)
    # Same layers per GPU on 1F1B: the bubble *time* is v times larger.
    raw = pipeline_raw(p, m, "1f1b")
    raw["model"]["layers"] = 2 * p * v
    plain = simulate(from_dict(raw))
    assert plain.breakdown_s["bubble"] == pytest.approx(v * inter.breakdown_s["bubble"], rel=1e-2)


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_every_stage_runs_each_forward_and_backward_once_forward_first(schedule, v):
    p, m = 4, 8
    for s in range(p):
        order = stage_order(schedule, s, p, m, v)
        assert sorted(order) == sorted([(k, i, c) for k in "FB" for i in range(m) for c in range(v)])
        for i in range(m):
            for c in range(v):
                assert order.index(("F", i, c)) < order.index(("B", i, c))


def test_1f1b_holds_p_minus_stage_micro_batches_and_gpipe_holds_all():
    # PipeDream-Flush memory: stage i keeps at most p - i micro-batches in flight; GPipe keeps m.
    p, m = 4, 8
    assert [peak_in_flight(stage_order("1f1b", s, p, m)) for s in range(p)] == [4, 3, 2, 1]
    assert all(peak_in_flight(stage_order("gpipe", s, p, m)) == m for s in range(p))


def test_1f1b_warmup_then_alternation():
    assert stage_order("1f1b", 0, 4, 6)[:6] == [("F", 0, 0), ("F", 1, 0), ("F", 2, 0), ("F", 3, 0),
                                                ("B", 0, 0),
                                                 ("F", 4, 0)]
    assert stage_order("1f1b", 3, 4, 6)[:4] == [("F", 0, 0), ("B", 0, 0), ("F", 1, 0), ("B", 1, 0)]


def test_gpipe_activation_memory_exceeds_1f1b():
    a = simulate(from_dict(pipeline_raw(4, 16, "gpipe")))
    b = simulate(from_dict(pipeline_raw(4, 16, "1f1b")))
    # Stage 0: 16 micro-batches in flight against 4.
    assert a.memory_by_class[0].activations == pytest.approx(4 * b.memory_by_class[0].activations)


def test_default_split_of_llama3_405b_is_7_8x14_7():
    # Llama 3 (2024) Sec. 3.3.2: 126 layers on 16 stages, first and last stage one layer fewer.
    raw = {"model": {"preset": "llama3-405b"}, "training": {"global_batch": 2048},
           "hardware": {"gpu": "h100-sxm"}, "cluster": {"nodes": 2048},
           "parallelism": {"tp": 8, "pp": 16, "order": "tp-cp-pp-dp"}}
    r = simulate(from_dict(raw))
    assert r.stage_layers == (7,) + (8,) * 14 + (7,)


def test_split_layers_balances_and_keeps_every_chunk_nonempty():
    assert split_layers([1.0] * 12, 4, 0.0, 0.0) == (3, 3, 3, 3)
    # A heavy last chunk (logits worth 2 layers) gets 2 fewer layers.
    assert split_layers([1.0] * 14, 4, 0.0, 2.0) == (4, 4, 4, 2)
    assert min(split_layers([1.0] * 5, 5, 3.0, 3.0)) == 1


def test_explicit_stage_layers_are_used():
    raw = pipeline_raw(4, 8)
    raw["parallelism"]["stage_layers"] = [1, 3, 3, 1]
    assert simulate(from_dict(raw)).stage_layers == (1, 3, 3, 1)


def _passes(r, stage=0):
    """Seconds of one F, B (input gradients) and W (weight gradients) pass on ``stage``."""
    kinds = {}
    for t in r.tasks:
        if t.cls == stage and t.stream == "compute":
            kinds.setdefault(t.kind, t.duration)
    return kinds["forward"], kinds["backward"], kinds.get("weight-grad", 0.0)


@pytest.mark.parametrize("p,m", [(4, 8), (4, 16), (8, 24)])
def test_zero_bubble_h1_and_h2_bubbles_follow_the_paper(p, m):
    # Qi et al., ICLR 2024, Sec. 3.1: 1F1B (p-1)(F+B+W), ZB-H1 (p-1)(F+B-W), ZB-H2 (p-1)(F+B-2W),
    # with B the input-gradient pass and W the weight-gradient pass.
    base = simulate(from_dict(pipeline_raw(p, m, "1f1b")))
    h1 = simulate(from_dict(pipeline_raw(p, m, "zb-h1")))
    h2 = simulate(from_dict(pipeline_raw(p, m, "zb-h2")))
    F, B, W = _passes(h1)
    assert W > 0 and B > 0
    # Tolerance 3%: the residual is the scenario's (tiny, non-zero) stage-to-stage transfers and
    # its near-empty output layer, whose GEMMs still pay whole tiles (kernels.py); the three
    # formulas differ by W, about a third of F + B + W here.
    assert base.breakdown_s["bubble"] == pytest.approx((p - 1) * (F + B + W), rel=0.03)
    assert h1.breakdown_s["bubble"] == pytest.approx((p - 1) * (F + B - W), rel=0.03)
    assert h2.breakdown_s["bubble"] == pytest.approx((p - 1) * (F + B - 2 * W), rel=0.03)
    # Memory (Table 1 of the paper): ZB-H1 as 1F1B (p micro-batches), ZB-H2 2p-1.
    a1, ah1, ah2 = (r.memory_by_class[0].activations for r in (base, h1, h2))
    assert ah1 == pytest.approx(a1)
    assert ah2 == pytest.approx(a1 * (2 * p - 1) / p)


def test_zero_bubble_orders_keep_dependencies_and_lags():
    from explorer.schedules.zero_bubble import zero_bubble_order
    p, m = 4, 6
    for s in range(p):
        o = zero_bubble_order("zb-h1", s, p, m)
        assert sorted(o) == sorted([(k, i, 0) for k in "FBW" for i in range(m)])
        for i in range(m):
            assert o.index(("F", i, 0)) < o.index(("B", i, 0)) < o.index(("W", i, 0))
        # Warm-up: the p-1-s forwards of 1F1B before the first backward.
        assert [k for k, _, _ in o[: p - 1 - s]] == ["F"] * (p - 1 - s)


@pytest.mark.parametrize("p,m", [(4, 8), (8, 16)])
def test_pipedream_async_has_no_bubble_in_steady_state_and_stashes_weights(p, m):
    # PipeDream (Narayanan et al., SOSP 2019): 1F1B without flushes keeps every stage busy, so an
    # iteration takes m(F+B) against (m+p-1)(F+B) for 1F1B with a flush — at the price of one
    # stashed weight version per micro-batch in flight (p - s on stage s).
    sync = simulate(from_dict(pipeline_raw(p, m, "1f1b")))
    asyn = simulate(from_dict(pipeline_raw(p, m, "pipedream-async")))
    assert asyn.bubble_fraction == pytest.approx(0.0, abs=0.01)
    assert asyn.iteration_time_s == pytest.approx(sync.iteration_time_s * m / (m + p - 1), rel=0.01)
    assert asyn.memory_by_class[0].params == pytest.approx(p * sync.memory_by_class[0].params)
    assert asyn.memory_by_class[p - 1].params == pytest.approx(sync.memory_by_class[p - 1].params)
    assert asyn.memory_by_class[0].activations == pytest.approx(sync.memory_by_class[0].activations)
    assert asyn.comm_bytes_per_gpu["pp"] == pytest.approx(sync.comm_bytes_per_gpu["pp"])


def test_pipedream_async_period_is_the_dp_stream_when_its_gradient_sync_is_slower():
    # PipeDream (Narayanan et al., SOSP 2019, Sec. 3): in steady state every stream of every stage
    # must keep up, so the slowest one sets the period.  Two replicas of a 4-stage pipeline on two
    # nodes joined by 1 Gb/s NICs: each stage's gradient all-reduce (its buckets, as the network
    # prices them) takes ~100x m(F+B), so the iteration is that all-reduce and the breakdown charges
    # the time beyond the compute window to dp.
    p, m = 4, 8

    def scenario(nic_Gbps: float):
        raw = pipeline_raw(p, m, "pipedream-async", dp=2, parallelism__order="tp-cp-pp-dp")
        raw["cluster"].update(gpus_per_node=p, nodes=2, scale_out={"nic_Gbps": nic_Gbps, "latency_us": 0})
        return from_dict(raw)

    sc = scenario(1.0)
    run = schedule_iteration(sc)
    dp_busy = []
    for s in range(p):
        grads = run.builder.chunk_of(s, 0).params * grad_reduce_bytes(sc)
        buckets = math.ceil(grads / (sc.communication.bucket_MB * 1e6))
        dp_busy.append(buckets * run.net.cost("all-reduce", grads / buckets, "dp", s).time_s)
    r = simulate(sc)
    cheap = simulate(scenario(400.0))            # same compute; the period is m(F+B) (+ optimizer)
    assert max(dp_busy) > 50 * cheap.iteration_time_s
    assert r.iteration_time_s == pytest.approx(max(dp_busy), rel=1e-9)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert r.breakdown_s["dp"] == pytest.approx(r.iteration_time_s - cheap.iteration_time_s, rel=1e-3)
    assert r.breakdown_s["bubble"] < 1e-9
    assert max(r.utilisation.values()) <= 1.0 + 1e-9


@pytest.mark.parametrize("k", [2, 4])
def test_terapipe_token_slices_shrink_the_bubble_at_equal_work(k):
    # TeraPipe (Li et al., ICML 2021): k token slices per sequence pipeline like k micro-batches,
    # so the GPipe bubble becomes (p-1)/(mk+p-1) while the FLOPs stay those of the whole sequences.
    p, m = 4, 4
    whole = simulate(from_dict(pipeline_raw(p, m, "gpipe")))
    sliced = simulate(from_dict(pipeline_raw(p, m, "gpipe", parallelism__token_slices=k)))
    assert sliced.bubble_fraction == pytest.approx((p - 1) / (m * k + p - 1), rel=0.01)
    assert sliced.tflops_per_gpu * sliced.iteration_time_s == pytest.approx(
        whole.tflops_per_gpu * whole.iteration_time_s, rel=1e-9)
    assert sliced.iteration_time_s < whole.iteration_time_s


@pytest.mark.parametrize("p,m", [(4, 16), (8, 32)])
def test_dualpipe_bubble_and_memory_follow_the_deepseek_v3_report(p, m):
    # DeepSeek-V3 report, Table 2 (B = full backward there): bubble (PP/2-1)(F&B+B-3W),
    # parameters 2x (two chunks per rank), activations PP+1 micro-batches against 1F1B's PP.
    base = simulate(from_dict(pipeline_raw(p, m, "1f1b")))
    dual = simulate(from_dict(pipeline_raw(p, m, "dualpipe")))
    d = {}
    for t in dual.tasks:
        if t.cls == 0 and t.stream == "compute":
            d.setdefault(t.kind, t.duration)
    full_b = d["backward"] + d["weight-grad"]
    expected = (p // 2 - 1) * (d["F&B"] + full_b - 3 * d["weight-grad"])
    # Tolerance 10%: the formula idealises the warm-up; the engine schedules the exact order.
    assert dual.breakdown_s["bubble"] == pytest.approx(expected, rel=0.10)
    assert dual.memory_by_class[0].params == pytest.approx(2 * base.memory_by_class[0].params)
    # (1e-3: rank 0 also holds the output layer's logits, which 1F1B keeps on the last stage.)
    assert dual.memory_by_class[0].activations == pytest.approx(
        base.memory_by_class[0].activations * (p + 1) / p, rel=1e-3)


def test_dualpipe_runs_every_pass_once_per_rank():
    from collections import Counter

    from explorer.schedules.base import FusedOp
    from explorer.schedules.dualpipe import dualpipe_order
    p, m = 8, 32
    for r in range(p):
        seen = Counter()
        for op in dualpipe_order(r, p, m):
            if isinstance(op, FusedOp):
                assert (op.forward.kind, op.backward.kind) == ("F", "B")
                seen[("F", op.forward.direction, op.forward.mb)] += 1
                seen[("B", op.backward.direction, op.backward.mb)] += 1
            elif op.kind in ("B", "Bz"):
                seen[("B", op.direction, op.mb)] += 1
            else:
                seen[(op.kind, op.direction, op.mb)] += 1
        assert all(seen[("F", d, i)] == 1 and seen[("B", d, i)] == 1 for d in (0, 1) for i in range(m // 2))
        assert sum(v for k, v in seen.items() if k[0] == "W") == sum(
            1 for op in dualpipe_order(r, p, m) if op.kind == "Bz")


def test_dualpipe_hides_expert_all_to_all_behind_the_other_micro_batch():
    from explorer.scenario import apply_overrides, load_raw

    from conftest import SCENARIO_FILES
    raw = load_raw([f for f in SCENARIO_FILES if f.stem == "deepseek-v3"][0])
    one = simulate(from_dict(apply_overrides(raw, {"parallelism.schedule": "1f1b"})))
    dual = simulate(from_dict(apply_overrides(raw, {"parallelism.schedule": "dualpipe"})))
    assert dual.breakdown_s["ep"] < 0.5 * one.breakdown_s["ep"]
    assert dual.iteration_time_s < one.iteration_time_s


def _dp_raw(priority: bool) -> dict:
    return {"model": {"layers": 16, "hidden": 4096, "heads": 32, "vocab": 1000, "seq_len": 2048},
            "training": {"global_batch": 16, "micro_batch": 1}, "hardware": {"gpu": "h100-sxm"},
            "cluster": {"gpus_per_node": 8, "nodes": 2, "scale_out": {"nic_Gbps": 25}},
            "parallelism": {"tp": 1, "pp": 1, "zero": 0},
            "communication": {"dp_overlap": True, "bucket_MB": 100, "dp_priority": priority}}


def test_p3_priority_reduces_the_first_layers_first_and_restarts_earlier():
    # P3 (Jayarajan et al., SysML 2019): buckets are released last-layer first by the backward;
    # with priorities the first layers' bucket jumps the queue as soon as it is ready.
    fifo = simulate(from_dict(_dp_raw(False)))
    p3 = simulate(from_dict(_dp_raw(True)))
    def order(r):
        dp = sorted((t for t in r.tasks if t.kind == "dp"), key=lambda t: t.start)
        return [t.info.layer_rank for t in dp]
    assert order(fifo) == list(range(7, -1, -1))
    assert order(p3) == [7] + list(range(0, 7))          # the one already running, then first layers first
    assert p3.iteration_time_s < fifo.iteration_time_s
    compute = sum(t.duration for t in p3.tasks if t.kind in ("forward", "backward"))
    assert p3.iteration_time_s >= compute
    assert sum(p3.breakdown_s.values()) == pytest.approx(p3.iteration_time_s, rel=1e-9)


def test_p3_needs_overlap_and_a_flushing_schedule():
    from explorer.scenario import ScenarioError
    raw = _dp_raw(True)
    raw["communication"]["dp_overlap"] = False
    with pytest.raises(ScenarioError, match="communication.dp_priority"):
        from_dict(raw)


def test_split_layers_is_fast_for_100k_layers_and_balances_interleaved_stages():
    """Prefix sums and bisection: 100,000 layers split in well under a second (the per-layer
    greedy took about 0.5 s at 16 chunks).  Interleaved: 24 layers in 12 chunks on 4 stages with a
    heavy last chunk keeps chunks of 2 and moves a layer off the output-layer chunk instead of the
    min-max-chunk split 3 x 6, 1 x 6."""
    import time
    t0 = time.perf_counter()
    assert sum(split_layers([1.0] * 100_000, 64, 2.0, 3.0, stages=16)) == 100_000
    assert time.perf_counter() - t0 < 1.0
    assert split_layers([1.0] * 24, 12, 0.01, 2.17) == (3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1)
    assert split_layers([1.0] * 24, 12, 0.01, 2.17, stages=4) == (2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 2, 1)


def test_orders_are_named_ops_that_callers_own():
    """Ops are named tuples read by field (schedules/base.py); the one-direction orders share their
    op objects through tables that grow with m, so a caller's list is its own to change."""
    from explorer.schedules.base import ChunkOp, DirectedOp, FusedOp
    from explorer.schedules.dualpipe import dualpipe_order

    order = stage_order("1f1b", 0, 4, 8)
    assert all(isinstance(op, ChunkOp) for op in order)
    assert [(op.kind, op.mb) for op in order] == [
        ("F", 0), ("F", 1), ("F", 2), ("F", 3), ("B", 0), ("F", 4), ("B", 1), ("F", 5), ("B", 2),
        ("F", 6), ("B", 3), ("F", 7), ("B", 4), ("B", 5), ("B", 6), ("B", 7)]
    order.clear()
    assert len(stage_order("1f1b", 0, 4, 8)) == 16
    small, large = stage_order("gpipe", 0, 2, 3), stage_order("gpipe", 0, 2, 300)
    assert [op.mb for op in small] == [0, 1, 2] * 2 and [op.mb for op in large] == list(range(300)) * 2
    assert {op.chunk for op in stage_order("interleaved", 1, 2, 4, 3)} == {0, 1, 2}
    ops = dualpipe_order(0, 4, 8)
    fused = [op for op in ops if isinstance(op, FusedOp)]
    assert fused and all((op.kind, op.forward.kind, op.backward.kind) == ("FB", "F", "B") for op in fused)
    assert all(isinstance(op, DirectedOp) for op in ops if not isinstance(op, FusedOp))
