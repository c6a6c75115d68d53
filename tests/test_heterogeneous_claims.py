"""Every number in the description of scenarios/mixed-generations.yaml, one test per claim, each
quoting its sentence (the conventions of tests/test_scenario_claims.py: "about X" within a stated
tolerance, directions strict).  The prose rounds to two digits and the tests allow 2%: exact
relations (the all-H100 time, the 22/10 split) are asserted exactly instead."""
from __future__ import annotations

import pytest
from test_scenario_claims import SCEN, about, sim

from explorer.scenario import load
from explorer.simulate import simulate

MG = "mixed-generations"
SPEED = {"parallelism.batch_split": "speed"}


def rows(r) -> dict[str, dict]:
    return {x["name"]: x for x in r.replicas}


def test_cluster_is_512_h100_and_512_b200_dp_32_across():
    """`hopper` holds 512 H100s and `blackwell` 512 B200s (64 nodes each) ... DP 32: 16 replicas per
    datacenter."""
    r = sim(MG)
    sc = r.scenario
    assert sc.cluster.datacenter_gpus == ("h100-sxm", "b200") and sc.cluster.nodes_of(0) == 64
    assert sc.dp == 32 and {x["replicas"] for x in r.replicas} == {16}
    assert {x["gpu"] for x in r.replicas} == {"H100 SXM", "B200"}


def test_slowest_generation_sets_the_pace():
    """An H100 replica takes about 7.8 s per iteration, a B200 replica would finish in about 5.5 s,
    so the B200s wait about 2.37 s at the gradient reduction ... The iteration is exactly the
    all-H100 cluster's ... MFU over every GPU's own peak drops from about 24% (all H100) to about
    14%."""
    r = sim(MG)
    x = rows(r)
    assert about(x["hopper"]["iteration_time_s"], 7.8, 0.02)
    assert about(x["blackwell"]["iteration_time_s"], 5.5, 0.02)
    assert about(x["blackwell"]["wait_s"], 2.37, 0.002) and x["hopper"]["wait_s"] == 0.0
    assert r.iteration_time_s == x["hopper"]["iteration_time_s"]
    h100 = simulate(load(SCEN / f"{MG}.yaml", {"cluster.datacenters": [
        {"name": "hopper", "nodes": 64}, {"name": "blackwell", "nodes": 64}]}))
    assert h100.iteration_time_s == r.iteration_time_s
    assert about(h100.mfu, 0.24, 0.03) and about(r.mfu, 0.14, 0.04)


def test_speed_split_22_and_10_micro_batches():
    """each B200 replica gets 22 micro-batches and each H100 replica 10 ... the wait shrinks to
    about 0.01 s and the iteration drops from about 7.8 to about 6.3 s (21 and 11, 0.25 s and 6.5 s
    before B200's GEMMs ran at its measured sustained clock alone; 0.025 s before B200's attention
    took its measured cuDNN curve, physics/attention_blackwell.py)."""
    r = sim(MG, SPEED)
    x = rows(r)
    assert x["blackwell"]["micro_batches"] == 22 and x["hopper"]["micro_batches"] == 10
    assert 16 * 22 + 16 * 10 == r.scenario.training.global_batch
    assert about(x["blackwell"]["wait_s"], 0.012, 0.03)
    assert about(r.iteration_time_s, 6.3, 0.02) and r.iteration_time_s < sim(MG).iteration_time_s


def test_speed_split_with_hierarchical_dp():
    """With hierarchical DP as well (`communication.algorithm: hierarchical`: the WAN link carries
    212 GB per iteration instead of 410 GB) it takes about 5.8 s."""
    hier = sim(MG, {**SPEED, "communication.algorithm": "hierarchical"})
    assert about(hier.wan_links[0]["bytes_per_iteration"], 212e9, 0.005)
    assert about(sim(MG).wan_links[0]["bytes_per_iteration"], 410e9, 0.005)
    assert about(hier.iteration_time_s, 5.8, 0.02)


def test_a100_instead_of_b200():
    """B200 replaced by A100s (`gpu: a100-80gb` for `blackwell`) and the iteration is about 14.7 s;
    the H100s now wait about 7 s."""
    r = simulate(load(SCEN / f"{MG}.yaml", {"cluster.datacenters": [
        {"name": "hopper", "nodes": 64, "gpu": "h100-sxm"}, {"name": "blackwell", "nodes": 64,
                                                             "gpu": "a100-80gb"}]}))
    assert about(r.iteration_time_s, 14.73, 0.001)
    assert about(rows(r)["hopper"]["wait_s"], 7.0, 0.03)


def test_pp_across_runs_the_late_stages_on_b200():
    """PP across instead (`parallelism.span: pp`): stages 0-1 run on the H100s and stages 2-3 on the
    B200s, only activations cross the WAN (69 GB), DP stays inside each datacenter, and the
    iteration takes about 4.8 s; the H100 stages are the pipeline's slowest."""
    r = sim(MG, {"parallelism.span": "pp"})
    assert [c.name.split(" · ")[-1] for c in r.classes] == ["H100 SXM", "H100 SXM", "B200", "B200"]
    assert r.comm_bytes_by_tier["dp"]["scale-across"] == 0
    assert about(r.wan_links[0]["bytes_per_iteration"], 69e9, 0.01)
    assert about(r.iteration_time_s, 4.8, 0.01)
    assert r.classes[r.breakdown_class].name.endswith("H100 SXM")


def test_pp_across_speed_split_gives_b200_stages_more_layers():
    """Add `parallelism.batch_split: speed` and the layers follow the speed: 13 and 13 of the 80 on
    the H100 stages, 28 and 26 on the B200 stages, and the iteration drops to about 4.24 s."""
    r = sim(MG, {"parallelism.span": "pp", **SPEED})
    assert r.stage_layers == (13, 13, 28, 26)
    assert about(r.iteration_time_s, 4.24, 0.002)         # 4.28 s before a WAN hop's per-flow share
    assert r.iteration_time_s < sim(MG, {"parallelism.span": "pp"}).iteration_time_s


@pytest.mark.parametrize("claim", ["2.37 s", "7.8 s", "5.5 s", "22", "6.3 s", "212 GB", "5.8 s", "14.7 s",
                                   "4.8 s", "69 GB", "24%", "14%",
                                   "28 and 26", "4.24 s"])
def test_description_says_what_is_tested(claim):
    assert claim in load(SCEN / f"{MG}.yaml").description
