"""PipeDream's hybrid of pipeline and data parallelism (``parallelism.stage_replicas``; Narayanan
et al., "PipeDream: Generalized Pipeline Parallelism for DNN Training", SOSP 2019, Sec. 3.1-3.2):
1F1B-RR over a stage's replicas, each stage's gradient group over its own replicas, transfers
between the two replicas' GPUs, PipeDream's partitioner over layers and replicas, and the
one-line errors of the field."""
from __future__ import annotations

import math
from itertools import combinations

import pytest

from explorer.analysis.steady_state import schedule_iteration
from explorer.cli import main
from explorer.engine.records import BucketInfo, TransferInfo
from explorer.network.groups import Network
from explorer.network.replica_groups import pair_code
from explorer.scenario import load
from explorer.schedules.registry import get as get_schedule
from explorer.simulate import simulate
from explorer.taskgraph import replica_split, replicas
from explorer.taskgraph.layout import normalise
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "pipedream-vgg16.yaml"
# VGG-16's 13 convolutions: weights 3x3 x c_in x c_out plus biases (Simonyan & Zisserman 2015).
_CONV = [(3, 64), (64, 64), (64, 128), (128, 128), (128, 256), (256, 256), (256, 256),
         (256, 512), (512, 512), (512, 512), (512, 512), (512, 512), (512, 512)]
CONV_PARAMS = sum(9 * a * b + b for a, b in _CONV)


def test_conv_params_are_vggs():
    assert CONV_PARAMS == 14_714_688


def test_one_replica_per_stage_is_1f1b():
    """With one replica per stage 1F1B-RR is 1F1B: warm-up p - s (PipeDream's NOAM), the same
    program order as the registry's 1f1b on every stage."""
    p, m = 4, 8
    sched = get_schedule("1f1b")
    orders = sched.orders(p, m, 1, None)
    for s in range(p):
        assert replicas.warm_up((1,) * p, s) == p - s
        want = [normalise(op, sched) for op in orders[s]]
        assert replicas.replica_order((1,) * p, s, 0, m) == want


def test_noam_of_15_1():
    """PipeDream's NOAM for the input stage: ceil(16 workers / 15 input replicas) = 2."""
    assert replicas.warm_up((15, 1), 0) == 2 and replicas.warm_up((15, 1), 1) == 1
    order = replicas.replica_order((15, 1), 0, 3, 60)
    assert [(ps.kind, ps.mb) for ps in order[:4]] == [("F", 3), ("F", 18), ("B", 3), ("F", 33)]


@pytest.mark.parametrize("r, m", [(15, 15), (5, 15), (3, 30)])
def test_a_replicated_stage_computes_m_over_r_units_a_period(r, m):
    """Closed form, communication free: the replicas of the bottleneck stage take its units
    round-robin, so an iteration of m units (a multiple of r) lasts m/r x t, t one unit's forward
    and backward on the stage (steady state of pipedream-async); ceil(m/r) x t in general
    (replicas.steady_seconds)."""
    sc = load(SCENARIO, {"parallelism.stage_replicas": [r, 16 - r], "training.global_batch": 64 * m})
    run = schedule_iteration(sc, frozenset({"comm", "optimizer"}))
    ch = run.builder.chunk_of(0, 0)
    t = sum(x for _, x in ch.fwd_parts) + sum(x for _, x in ch.bwd_parts)
    assert run.T == pytest.approx(replicas.steady_seconds(t, m, r), rel=1e-9)
    assert replicas.steady_seconds(t, 16, 5) == 4 * t


def test_a_flushed_iteration_gives_the_busiest_replica_ceil_m_over_r_units():
    """1f1b (a flush per iteration): replica 0 of stage 0 computes ceil(m/r) units, replica r-1
    floor(m/r); 16 units on 5 replicas: 4 and 3."""
    sc = load(SCENARIO, {"parallelism.stage_replicas": [5, 11], "parallelism.schedule": "1f1b",
                         "training.global_batch": 64 * 16})
    run = schedule_iteration(sc, frozenset({"comm"}))
    fwd = {st: sum(1 for t in run.tasks if t.cls == 0 and t.stream == st and t.kind == "forward")
           for st in ("compute", "compute~4")}
    assert fwd == {"compute": math.ceil(16 / 5), "compute~4": 16 // 5}


def test_each_stage_reduces_over_its_own_replicas_and_the_fc_stage_not_at_all():
    """15-1: stage 0's ring all-reduce over its 15 replicas moves 2 x 14/15 x the convolutions'
    fp32 gradients per GPU; the FC stage (r = 1) has no gradient bucket at all."""
    sc = load(SCENARIO)
    net = Network(sc)
    assert net.group_size("dp", 0) == 15 and net.group_size("dp", 1) == 1
    res = simulate(sc)
    assert res.comm_bytes_per_gpu["dp"] == pytest.approx(2 * 14 / 15 * CONV_PARAMS * 4, rel=1e-9)
    buckets = {t.cls for t in res.tasks if isinstance(t.info, BucketInfo)}
    assert buckets == {0}
    assert [c.gpus for c in res.classes] == [15, 1]


def test_transfers_go_between_the_two_replicas_gpus():
    """Micro-batch j leaves replica j mod 15 of stage 0 for the FC GPU (GPU 15, server 3): from
    replicas 12-14 (server 3) over PCIe, from the others over the 10 GbE NIC."""
    sc = load(SCENARIO)
    net = Network(sc)
    assert list(net.members("pp", pair_code(sc, 0, 12, 0))) == [12, 15]
    fwd = {t.info.micro_batch: t for t in simulate(sc).tasks
           if isinstance(t.info, TransferInfo) and t.info.direction == "forward" and t.info.micro_batch < 15}
    assert fwd[0].stream == "pp" and fwd[13].stream == "pp~13"
    assert all(fwd[j].info.tier == "scale-up" for j in (12, 13, 14))
    assert all(fwd[j].info.tier == "scale-out" for j in range(12))
    assert fwd[12].duration < fwd[0].duration / 10


def test_pipedreams_partitioner_chooses_15_1():
    """stage_replicas auto on the shipped cluster: 13 | 3 layers on 15 | 1 replicas, what
    PipeDream's optimizer chose (the artifact's vgg16/gpus=16/hybrid_conf.json); its predicted
    slowest stage is the simulated period's compute."""
    sc = load(SCENARIO, {"parallelism.stage_replicas": "auto", "parallelism.stage_layers": None})
    assert sc.parallelism.stage_replicas == (0, 0)
    got = replica_split.plan(sc)
    assert (got.layers, got.replicas) == ((13, 3), (15, 1))
    res = simulate(sc)
    assert res.scenario.parallelism.stage_replicas == (15, 1) and res.stage_layers == (13, 3)
    assert got.seconds == pytest.approx(res.breakdown_s["compute"], rel=1e-9)
    # Given replicas without layers: the partitioner chooses the layers for them.
    given = load(SCENARIO, {"parallelism.stage_layers": None})
    assert iteration_builder(given).layer_counts == (13, 3)


def test_the_partitioner_is_exact_over_every_split_and_replica_count():
    """3 stages on 2 servers x 4 GPUs: the search's optimum equals the best of all 105 splits of
    16 layers x 21 replica counts, each priced by the same stage and boundary costs."""
    sc = load(SCENARIO, {"cluster.nodes": 2, "parallelism.pp": 3, "parallelism.stage_replicas": "auto",
                         "parallelism.stage_layers": None, "training.global_batch": 64 * 6})
    c = replica_split._Costs(sc)
    best = math.inf
    for a, b in combinations(range(1, 16), 2):
        cuts = (0, a, b, 16)
        for x, y in combinations(range(1, 8), 2):
            r = (x, y - x, 8 - y)
            off = (0, x, y)
            t = max(max(c.stage(cuts[s], cuts[s + 1], off[s], r[s]) for s in range(3)),
                    c.boundary(a, 0, r[0], r[1]), c.boundary(b, x, r[1], r[2]))
            best = min(best, t)
    assert replica_split.plan(sc).seconds == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("changes, words", [
    ({"parallelism.stage_replicas": [15, 1, 0]}, "has 3 entries"),
    ({"parallelism.stage_replicas": [14, 1]}, "sums to 15"),
    ({"parallelism.stage_replicas": [15, 0]}, "mixes 0"),
    ({"parallelism.dp": 2}, "parallelism.dp"),
    ({"parallelism.schedule": "gpipe"}, "1F1B-RR"),
    ({"parallelism.zero": 1}, "parallelism.zero"),
    ({"training.framework": "deepspeed"}, "training.framework"),
])
def test_bad_replicas_are_one_line_errors(changes, words, capsys):
    args = ["validate", str(SCENARIO)]
    for k, v in changes.items():
        args += ["--set", f"{k}={v}".replace(" ", "")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "parallelism.stage_replicas" in err and words in err and "\n" not in err and "Traceback" not in err


def test_the_fields_bound_is_the_gpu_limit():
    from explorer.config.replica_field import STAGE_REPLICAS_FIELD
    from explorer.config.sections import MAX_GPUS
    assert STAGE_REPLICAS_FIELD["max"] == MAX_GPUS


def test_equal_replicas_are_the_uniform_hybrid():
    """stage_replicas [2, 2] is pp 2 x dp 2 (Llama-style transformer, tp 2, 1f1b): the same
    iteration to the last bit — replica k of a stage runs micro-batches k, k + 2, ... as the dp
    replicas split the batch, with 1F1B's warm-up; and PipeDream's partitioner, asked for the
    replicas, chooses these on this model."""
    teaching = ROOT / "scenarios" / "teaching-8gpu.yaml"
    base = {"parallelism.pp": 2, "parallelism.tp": 2, "parallelism.zero": 0, "parallelism.schedule": "1f1b"}
    uniform = simulate(load(teaching, {**base, "parallelism.dp": 2}))
    reps = simulate(load(teaching, {**base, "parallelism.dp": 1, "parallelism.stage_replicas": [2, 2],
                                    "parallelism.stage_layers": list(uniform.stage_layers)}))
    assert reps.iteration_time_s == uniform.iteration_time_s
    assert reps.comm_bytes_per_gpu == uniform.comm_bytes_per_gpu
    assert reps.comm_bytes_by_tier == uniform.comm_bytes_by_tier
    assert reps.utilisation == pytest.approx(uniform.utilisation, rel=1e-12)
    auto = simulate(load(teaching, {**base, "parallelism.dp": 1, "parallelism.stage_replicas": "auto"}))
    assert auto.scenario.parallelism.stage_replicas == (2, 2)


@pytest.mark.parametrize("changes, words", [
    # 1F1B-RR gives micro-batch j to replica j mod r: fewer than r leaves replicas idle; the 1f1b
    # case stopped the engine with an internal error (CycleError), exit 1.
    ({"training.global_batch": 64, "parallelism.schedule": "1f1b"}, "1 micro-batch of 64, fewer than the 15"),
    ({"training.global_batch": 320}, "at least 960"),
    ({"training.global_batch": 64, "parallelism.stage_replicas": "auto", "parallelism.stage_layers": None,
      "parallelism.schedule": "1f1b"}, "too few for stage_replicas auto to place 16 replicas"),
])
def test_every_replica_needs_a_micro_batch(changes, words, capsys):
    args = ["run", str(SCENARIO)]
    for k, v in changes.items():
        args += ["--set", f"{k}={'null' if v is None else v}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "training.global_batch" in err and words in err and "\n" not in err


def test_auto_gives_no_stage_more_replicas_than_micro_batches():
    """10 micro-batches on 16 replica slots over 2 stages: no stage gets more than 10 (the
    partitioner's choice without the bound was 15-1)."""
    sc = load(SCENARIO, {"training.global_batch": 640, "parallelism.stage_replicas": "auto",
                         "parallelism.stage_layers": None})
    got = replica_split.plan(sc)
    assert sum(got.replicas) == 16 and max(got.replicas) <= 10


def test_a_run_beyond_the_budget_is_refused_at_validation_not_after(capsys):
    """1.56M micro-batches on PipeDream's replicas: validate said ok (counting on the task fold, which
    replicas never take) and run refused; both refuse now, in one line."""
    for command in ("validate", "run"):
        assert main([command, str(SCENARIO), "--set", "training.global_batch=100000000"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: training.global_batch:") and "simulation budget" in err
        assert "\n" not in err
