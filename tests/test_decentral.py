"""parallelism.dp_kind (explorer/lowcomm/decentral.py): gossip moves one model per peer per step,
overlapped with the replica's step; a parameter server's NIC carries replicas x model bytes / S;
the graphs' neighbours; the validation of dp_kind."""
from __future__ import annotations

import pytest

from explorer.lowcomm.decentral import peer_offsets, replica_scenario
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate
from explorer.workload import model_params

from conftest import ROOT

ONE_DC = {"cluster.datacenters": 1, "parallelism.zero": 0}
TD = ROOT / "scenarios" / "two-datacenters.yaml"      # Llama 3 70B, tp 8 pp 4 dp 32


def _run(kind: str, **over):
    return simulate(load(TD, {**ONE_DC, "parallelism.dp_kind": kind, **over}))


# A 2 x 3 torus: up and down are the same replica, so 3 neighbours.
@pytest.mark.parametrize("kind, n, peers, expect", [
    ("gossip-ring", 2, 0, [1]), ("gossip-ring", 32, 0, [1, 31]),
    ("gossip-torus", 16, 0, [1, 3, 4, 12]), ("gossip-torus", 6, 0, [1, 2, 3]),
    ("gossip-exponential", 32, 0, [1, 2, 4, 8, 16]), ("gossip-exponential", 12, 0, [1, 2, 4, 8]),
    ("gossip-exponential", 32, 1, [1]),
])
def test_neighbours_of_each_graph(kind, n, peers, expect):
    assert peer_offsets(kind, n, peers) == expect


@pytest.mark.parametrize("kind, peers", [("gossip-ring", 2), ("gossip-torus", 4), ("gossip-exponential", 5)])
def test_a_gossip_step_moves_one_model_per_peer(kind, peers):
    """Each GPU sends its whole parameter shard (fp32) to each neighbour: peers x shard bytes."""
    res = _run(kind)
    x = res.exchange
    assert x.peers == peers
    rep = replica_scenario(res.scenario)
    shard = simulate(rep).memory.params / 2           # bf16 weights -> parameters, largest stage
    assert x.bytes_per_gpu["scale-up"] == pytest.approx(peers * shard * 4, rel=1e-12)


def test_gossip_overlaps_the_exchange_with_the_step():
    """D-PSGD: only what the exchange takes beyond the replica's step is exposed (plus averaging)."""
    for over in ({}, {"cluster.scale_out.nic_Gbps": 25}):
        res = _run("gossip-ring", **over)
        x = res.exchange
        avg = x.exposed_s - max(0.0, x.exchange_s - x.step_s)
        assert 0 < avg < 0.01 * x.step_s
        assert res.iteration_time_s == pytest.approx(x.step_s + x.exposed_s, rel=1e-12)
        assert res.breakdown_s["dp"] >= x.exposed_s
    slow = _run("gossip-ring", **{"cluster.scale_out.nic_Gbps": 25}).exchange
    assert slow.exchange_s > slow.step_s                # 25 Gb/s NICs: the exchange outlasts the step


def test_parameter_server_nic_carries_replicas_times_model_over_servers():
    """Li et al. (OSDI 2014) / BytePS (OSDI 2020): each of S server NICs receives dp x M / S bytes
    per step (and sends as much back); doubling S halves it."""
    sc = load(TD, {**ONE_DC, "parallelism.dp_kind": "parameter-server"})
    M = model_params(sc) * 4
    for S in (1, 4, 16):
        x = _run("parameter-server", **{"parallelism.ps_servers": S}).exchange
        assert x.server_nic_bytes == pytest.approx(sc.dp * M / S, rel=2e-3)
    few, many = (_run("parameter-server", **{"parallelism.ps_servers": S}).iteration_time_s for S in (1, 64))
    assert many < few


def test_one_peer_exponential_graph_is_cheaper_than_all_peers():
    """Ying et al. 2021: one power-of-two neighbour per step moves 1 model instead of log2(n)."""
    one = _run("gossip-exponential", **{"parallelism.gossip_peers": 1}, **{"cluster.scale_out.nic_Gbps": 25})
    full = _run("gossip-exponential", **{"cluster.scale_out.nic_Gbps": 25})
    assert one.exchange.peers == 1 and one.iteration_time_s < full.iteration_time_s
    sent = (full.exchange.bytes_per_gpu["scale-up"], one.exchange.bytes_per_gpu["scale-up"])
    assert sent[0] == pytest.approx(5 * sent[1])


def test_gossip_across_two_datacenters_loads_only_the_seam():
    """On a ring of 32 replicas over 2 datacenters only the 2 seam edges cross the WAN: the WAN is
    shared by the GPUs of those replicas, not by all 512 of a datacenter."""
    sc_over = {"parallelism.zero": 0, "parallelism.dp_kind": "gossip-ring"}
    res = simulate(load(TD, sc_over))
    # 2 x 32 GPUs of the seam replicas share the 1,600 Gb/s WAN each way: ~6 GB/s each, not 0.4.
    assert res.exchange.exchange_s < 3.0


@pytest.mark.parametrize("over, field", [
    ({"parallelism.dp_kind": "gossip-ring"}, "parallelism.zero"),
    ({"parallelism.dp_kind": "parameter-server", "parallelism.zero": 0}, "parallelism.dp_kind"),
    ({"parallelism.dp_kind": "gossip-ring", "parallelism.zero": 0, "training.sync.kind": "diloco"},
     "parallelism.dp_kind"),
    ({"parallelism.dp_kind": "gossip-mesh"}, "parallelism.dp_kind"),
    ({"parallelism.ps_servers": 0}, "parallelism.ps_servers"),
])
def test_bad_dp_kind_settings_name_their_field(over, field):
    with pytest.raises(ScenarioError) as e:
        load(TD, over)
    assert e.value.field == field


def test_json_reports_the_exchange():
    out = _run("parameter-server", **{"parallelism.ps_servers": 8}).to_json_dict()
    x = out["dp_exchange"]
    assert x["kind"] == "parameter-server" and x["peers"] == 8 and "OSDI 2014" in x["quality"]
    assert out["time_per_step_s"] == out["iteration_time_s"]


# Teaching-8gpu as 8 one-GPU replicas under the ideal pipeline: a replica's step is pure compute, so
# a straggler at slowdown 2 takes exactly twice as long (explorer/replicas.py slows compute kernels).
EIGHT = ROOT / "scenarios" / "teaching-8gpu.yaml"
EIGHT_REPLICAS = {"parallelism.pp": 1, "parallelism.dp": 8, "parallelism.ideal_pipeline": True}
ONE_STRAGGLER = {"cluster.stragglers.count": 1, "cluster.stragglers.slowdown": 2.0}


def _eight(kind: str, **over):
    return simulate(load(EIGHT, {**EIGHT_REPLICAS, "parallelism.dp_kind": kind, **over}))


def test_synchronous_gossip_runs_at_the_stragglers_pace():
    """D-PSGD (Lian et al. 2017, Alg. 1): each step needs the neighbours' models of the last, so one
    replica at half speed halves everyone's throughput; its kind is simulated (it was ignored)."""
    even = _eight("gossip-ring")
    slow = _eight("gossip-ring", **ONE_STRAGGLER)
    x = slow.exchange
    assert x.slowest_replica_step_s == pytest.approx(2 * x.fastest_replica_step_s, rel=1e-12)
    assert x.fastest_replica_step_s == pytest.approx(even.iteration_time_s, rel=1e-12)
    assert slow.iteration_time_s == pytest.approx(2 * even.iteration_time_s, rel=1e-12)
    assert x.samples_per_s == pytest.approx(even.exchange.samples_per_s / 2, rel=1e-12)
    assert [(r["name"], r["replicas"]) for r in slow.replicas] == [("straggler replica", 1), ("at speed", 7)]
    assert slow.replicas[1]["wait_s"] == pytest.approx(even.iteration_time_s, rel=1e-12)
    assert "straggler" in slow.warning_kinds
    assert sum(slow.breakdown_s.values()) == pytest.approx(slow.iteration_time_s, rel=1e-12)
    ps = _eight("parameter-server", **ONE_STRAGGLER)            # bulk-synchronous: waits too
    assert ps.iteration_time_s > _eight("parameter-server").iteration_time_s
