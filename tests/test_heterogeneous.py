"""Datacenters of different GPU types and sizes (explorer/variants/hetero.py): closed forms and directions.

Closed form (DP only, one stage, the gradient reduction after the backward, not overlapped): a
replica of kind k runs its passes back to back, C_k seconds of kernels on its GPU, then the joint
buckets (R s, the slowest kind's cost) and its optimizer (O_k).  The buckets start when the last
replica is ready, so T = max_k (C_k + O_k) + R.  A GPU at half the FLOP rate and half the HBM
bandwidth runs every kernel exactly twice as long: C and O double, and the cluster's iteration is
the all-half cluster's, to the bit.
"""
from __future__ import annotations

import json

import pytest
from hetero_support import half_h100_fixture, raw, scenario  # noqa: F401  (the half_h100 fixture)

from explorer.scenario import from_dict, load
from explorer.simulate import simulate
from explorer.variants import hetero

from conftest import ROOT

H100, A100, B200 = "h100-sxm", "a100-80gb", "b200"


def dcs(a: str, b: str, na: int = 1, nb: int = 1) -> list[dict]:
    return [{"name": "a", "nodes": na, "gpu": a}, {"name": "b", "nodes": nb, "gpu": b}]


def test_half_rate_gpus_double_compute_and_set_the_iteration_exactly(half_h100):
    """T(H100 + half-H100) = T(all half-H100) exactly; its compute is 2 x the all-H100's compute;
    the H100 replicas wait C_half - C at the gradient reduction."""
    mixed = simulate(scenario(dcs(H100, half_h100)))
    fast = simulate(scenario(dcs(H100, H100)))
    slow = simulate(scenario(dcs(half_h100, half_h100)))
    assert mixed.iteration_time_s == slow.iteration_time_s
    assert slow.breakdown_s["compute"] == pytest.approx(2 * fast.breakdown_s["compute"], rel=1e-12)
    assert slow.breakdown_s["optimizer"] == pytest.approx(2 * fast.breakdown_s["optimizer"], rel=1e-12)
    rows = {r["name"]: r for r in mixed.replicas}
    assert rows["a"]["gpu"] == "H100 SXM" and rows["b"]["gpu"] == "half H100"
    assert rows["a"]["replicas"] == rows["b"]["replicas"] == 8
    extra = slow.breakdown_s["compute"] - fast.breakdown_s["compute"]
    assert rows["a"]["wait_s"] == pytest.approx(extra, rel=1e-9)
    # T = max_k (C_k + O_k) + R: the slow kind's own figures add up to the iteration.
    b = slow.breakdown_s
    assert mixed.iteration_time_s == pytest.approx(b["compute"] + b["optimizer"] + b["dp"], rel=1e-9)


def test_faster_gpus_in_one_datacenter_do_not_speed_up_an_even_split():
    """Synchronous DP, even split: B200s beside H100s wait for them; the iteration is the all-H100
    cluster's, exactly (HetPipe: the slowest worker sets the pace)."""
    assert (simulate(scenario(dcs(H100, B200))).iteration_time_s
            == simulate(scenario(dcs(H100, H100))).iteration_time_s)


@pytest.mark.parametrize("slower", [A100, "half-h100"])
def test_a_slower_gpu_in_one_datacenter_never_makes_the_iteration_faster(slower, half_h100):
    """Replacing one datacenter's H100s by a slower GPU: never faster, and slower here (compute-bound
    enough that the difference shows)."""
    base = simulate(scenario(dcs(H100, H100))).iteration_time_s
    assert simulate(scenario(dcs(H100, slower))).iteration_time_s > base


def test_speed_split_gives_faster_gpus_more_micro_batches_and_is_faster():
    """parallelism.batch_split: speed splits 32 x 2 = 64 micro-batches over 8 H100 and 8 A100
    replicas in proportion to one layer's speed (whole micro-batches, the global batch exact); the
    iteration is faster than the even split, never slower than the all-H100 cluster."""
    even = simulate(scenario(dcs(H100, A100)))
    speed = simulate(scenario(dcs(H100, A100), batch_split="speed"))
    m = {r["name"]: r["micro_batches"] for r in speed.replicas}
    assert 8 * m["a"] + 8 * m["b"] == 32
    assert m["a"] > m["b"]
    assert speed.iteration_time_s < even.iteration_time_s
    assert speed.iteration_time_s >= simulate(scenario(dcs(H100, H100))).iteration_time_s * 0.999
    assert speed.tokens_per_s == pytest.approx(32 * 2048 / speed.iteration_time_s)


def test_split_micro_batches_is_proportional_and_exact():
    """Proportional where it divides; otherwise the rest goes where it finishes first; the total is
    always exact; impossible totals are a one-line error naming the field."""
    assert hetero.split_micro_batches(96, [16, 16], [2.0, 1.0]) == [4, 2]
    assert hetero.split_micro_batches(30, [1, 1, 1], [1.0, 1.0, 1.0]) == [10, 10, 10]
    m = hetero.split_micro_batches(100, [3, 5], [3.0, 1.0])
    assert 3 * m[0] + 5 * m[1] == 100 and m[0] > m[1]
    with pytest.raises(Exception, match="parallelism.batch_split"):
        hetero.split_micro_batches(7, [2, 4], [1.0, 1.0])


def test_unequal_sizes_hierarchical_bytes_per_tier():
    """A 2-node and a 1-node datacenter, hierarchical DP: each WAN link carries the gradient bytes S
    once per direction whatever the sizes (same as two 1-node datacenters); per GPU, the smaller
    datacenter's GPUs carry S / 8, the larger's S / 16: twice as much."""
    unequal = _hier(dcs(H100, H100, 2, 1))
    equal = _hier(dcs(H100, H100, 1, 1))
    link = unequal.wan_links[0]["bytes_per_iteration"]
    assert link == pytest.approx(equal.wan_links[0]["bytes_per_iteration"], rel=1e-12)
    rows = {r["name"]: r for r in unequal.replicas}
    assert rows["a"]["replicas"] == 16 and rows["b"]["replicas"] == 8
    wan_a = rows["a"]["dp_bytes_per_gpu_by_tier"]["scale-across"]
    wan_b = rows["b"]["dp_bytes_per_gpu_by_tier"]["scale-across"]
    assert wan_b == pytest.approx(2 * wan_a, rel=1e-12)
    assert wan_a * 16 == pytest.approx(link, rel=1e-12) and wan_b * 8 == pytest.approx(link, rel=1e-12)
    # S: the fp32 gradients of the teaching model's parameters (4 bytes each), 2(D-1)/D = 1 of them.
    params = link / 4
    assert 1.40e9 < params < 1.43e9


def _hier(d: list[dict]):
    r = raw(d)
    r["communication"]["algorithm"] = "hierarchical"
    return simulate(from_dict(r))


def test_unequal_sizes_split_the_batch_evenly_over_all_replicas():
    """24 replicas (16 + 8), 2 micro-batches each: tokens/s counts the whole global batch."""
    r = simulate(scenario(dcs(H100, H100, 2, 1)))
    assert r.scenario.dp == 24 and sum(x["replicas"] for x in r.replicas) == 24
    assert {x["micro_batches"] for x in r.replicas} == {2}
    assert r.tokens_per_s == pytest.approx(48 * 2048 / r.iteration_time_s)


def test_pp_across_stage_on_half_rate_gpus_runs_twice_as_long(half_h100):
    """PP across (one stage per datacenter): the stage in the half-rate datacenter runs every kernel
    2x (stage factor exactly 2), and its class names its GPU."""
    sc = scenario(dcs(H100, half_h100), pp=2, span="pp")
    assert hetero.stage_factors(sc) == (1.0, pytest.approx(2.0, rel=1e-12))
    r = simulate(sc)
    base = simulate(scenario(dcs(H100, H100), pp=2, span="pp"))
    assert r.iteration_time_s > base.iteration_time_s
    assert [c.name for c in r.classes] == ["stage 0 · a · H100 SXM", "stage 1 · b · half H100"]
    assert r.replicas == ()


def test_memory_is_checked_against_each_gpu_type(monkeypatch, half_h100):
    """A datacenter of 20 GiB GPUs: its replicas' memory (26 GB) is over its capacity and the
    warning names it; the H100 datacenter's is not."""
    from explorer.config.presets import gpu_presets
    gpu_presets()[half_h100]["memory_GB"] = 20
    r = simulate(scenario(dcs(H100, half_h100)))
    mem = [w for w, k in zip(r.warnings, r.warning_kinds, strict=True) if k == "memory"]
    assert len(mem) == 1 and mem[0].startswith("b (half H100)") and r.memory_over_capacity
    assert "memory" not in simulate(scenario(dcs(H100, H100))).warning_kinds


def test_mfu_uses_every_gpus_peak():
    """MFU of H100 + B200 = model FLOPs / (T x (8 x 989 + 8 x 2250) TFLOP/s): lower than the
    all-H100 run's at the same iteration time, by 2 x 989 / (989 + 2250)."""
    mixed = simulate(scenario(dcs(H100, B200)))
    h = simulate(scenario(dcs(H100, H100)))
    assert mixed.mfu == pytest.approx(h.mfu * 2 * 989 / (989 + 2250), rel=1e-9)


def test_shipped_scenario_mixes_h100_and_b200():
    sc = load(ROOT / "scenarios" / "mixed-generations.yaml")
    assert sc.cluster.datacenter_gpus == ("h100-sxm", "b200")
    r = simulate(sc)
    assert {x["gpu"] for x in r.replicas} == {"H100 SXM", "B200"}


@pytest.mark.parametrize("schedule", ["", "interleaved"])
def test_pp_across_a_slower_datacenter_never_speeds_up_a_faster_one_never_slows(schedule):
    """PP across (2 stages, one per datacenter): A100 stages in one datacenter never make the
    iteration faster than all-H100, B200 stages never slower (1F1B and the interleaved schedule,
    whose ranks hold chunks s, s + p: still one GPU type per rank)."""
    extra = {"vpp": 2, "schedule": _interleaved()} if schedule else {}

    def t(a: str, b: str) -> float:
        return simulate(scenario(dcs(a, b), pp=2, span="pp", **extra)).iteration_time_s
    base = t(H100, H100)
    assert t(H100, A100) > base
    assert t(H100, B200) <= base


def _interleaved() -> str:
    from explorer.schedules import registry
    return registry.megatron_schedule(2)


def test_pp_across_speed_layers_balance_the_stages(half_h100):
    """PP across, batch_split speed: stage s takes f_s x (n_s layers + its edge layer: the embedding
    on the first, the output layer on the last); the split is the one whose slower stage finishes
    first - moving a layer either way makes the slower stage slower.  The half-rate last stage,
    which also holds the output layer, gets 6 of the 24 layers; faster than the default split."""
    from explorer.physics.hardware import ComputeModel
    from explorer.workloads.transformer.layer import embedding_cost, logits_cost

    even = simulate(scenario(dcs(H100, half_h100), pp=2, span="pp"))
    sc = scenario(dcs(H100, half_h100), pp=2, span="pp", batch_split="speed")
    f = hetero.stage_factors(sc)
    layers = hetero.speed_layers(sc, f)
    cm, unit = ComputeModel.for_scenario(sc), hetero.layer_seconds(sc)
    edge = [sum(cm.time(w) for w in (c.fwd, c.bwd_input, c.bwd_weight))
            for c in (embedding_cost(sc), logits_cost(sc))]

    def worst(n0: int) -> float:
        return max(f[0] * (n0 * unit + edge[0]), f[1] * ((24 - n0) * unit + edge[1]))
    assert layers == (18, 6)
    assert worst(18) < worst(17) and worst(18) < worst(19)
    fast = simulate(sc)
    assert fast.stage_layers == layers and fast.iteration_time_s < even.iteration_time_s


def test_memory_is_reported_against_the_board_of_the_class_that_binds(capsys):
    """mixed-generations with hardware.gpu b200 (its datacenters keep their H100 and A100 boards) at
    tp 2: the H100 stage needs 147.2 GB.  run had printed "147.2 of 193.3 GB" (the B200 no
    datacenter runs) beside a correct memory warning, the JSON's memory_capacity_GB was 193.3 with
    memory_over_capacity true, and diff said "does not fit: 147.2 of 193.3 GB".  Every one now
    reads the H100's 85.9 GB; a homogeneous run is unchanged."""
    from explorer.cli import main
    sets = ["--set", "hardware.gpu=b200", "--set", "parallelism.tp=2"]
    assert main(["run", "mixed-generations", *sets, "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["memory_over_capacity"] and j["memory_capacity_GB"] == pytest.approx(85.899, abs=1e-3)
    assert j["memory_GB"]["total"] == pytest.approx(147.19, abs=0.01)
    assert main(["run", "mixed-generations", *sets]) == 0
    assert "memory per GPU: 147.2 of 85.9 GB (80 GiB)" in capsys.readouterr().out
    assert main(["diff", "mixed-generations", "--set", "hardware.gpu=b200",
                 "--set-b", "parallelism.tp=2"]) == 0
    assert "B does not fit: 147.2 of 85.9 GB per GPU" in capsys.readouterr().out
    assert main(["run", "teaching-8gpu", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["memory_capacity_GB"] == pytest.approx(85.899, abs=1e-3) and not j["memory_over_capacity"]
