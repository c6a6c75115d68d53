"""parallelism.dp_kind (explorer/variants/lowcomm/decentral.py): gossip moves one model per peer per step,
overlapped with the replica's step; a parameter server's NIC carries replicas x model bytes / S;
the graphs' neighbours; the validation of dp_kind."""
from __future__ import annotations

import pytest

from explorer.physics.hardware import hbm_efficiency
from explorer.scenario import ScenarioError, load
from explorer.simulate import simulate
from explorer.variants.lowcomm.amortise import step_busy
from explorer.variants.lowcomm.decentral import peer_offsets, replica_scenario
from explorer.workloads.transformer.layer import model_params

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
    """Each GPU sends its whole parameter shard (fp32) to each neighbour: peers x shard bytes, each
    over NVLink to a neighbour on its node or out of the node (network/p2p_link.py), never both."""
    res = _run(kind)
    x = res.exchange
    assert x.peers == peers
    rep = replica_scenario(res.scenario)
    shard = simulate(rep).memory.params / 2           # bf16 weights -> parameters, largest stage
    assert x.sent == pytest.approx(peers * shard * 4, rel=1e-12)
    assert x.sent == pytest.approx(x.bytes_per_gpu["scale-up"] + x.bytes_per_gpu["scale-out"], rel=1e-12)


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
    sent = (full.exchange.sent, one.exchange.sent)
    assert sent[0] == pytest.approx(5 * sent[1])


def test_gossip_across_two_datacenters_loads_only_the_seam():
    """On a ring of 32 replicas over 2 datacenters only the 2 seam edges cross the WAN: the WAN is
    shared by the GPUs of those replicas, not by all 512 of a datacenter.  At offset +1 replica 15's
    32 GPUs send out of datacenter 0, at offset -1 replica 0's: two phases, each 32 shards over the
    1,600 Gb/s WAN (x 0.9 achievable, topology.SCALE_ACROSS_EFFICIENCY) plus its 2 ms latency."""
    sc_over = {"parallelism.zero": 0, "parallelism.dp_kind": "gossip-ring"}
    res = simulate(load(TD, sc_over))
    x = res.exchange
    shard = x.sent / 2                                       # the largest stage's, one per neighbour
    wan_Bps = 1600e9 / 8 * 0.9
    assert x.exchange_s == pytest.approx(2 * (32 * shard / wan_Bps + 2e-3), rel=1e-3)
    # The WAN carries 2 x 32 shards per step: busy exchange_s of the step, not more.
    assert res.utilisation["scale-across"] == pytest.approx(2 * 32 * shard / wan_Bps / res.iteration_time_s,
                                                            rel=0.05)
    assert res.utilisation["scale-across"] <= 1.0


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
# a straggler at slowdown 2 takes exactly twice as long (explorer/variants/replicas.py slows compute kernels).
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


# --------------------------------------------------------------------------- asynchronous gossip
def test_async_gossip_with_equal_replicas_is_one_peer_gossip():
    """AD-PSGD (Lian et al. 2018, Alg. 1) with replicas alike: one model each way with one ring
    neighbour per step, overlapped with the step: time per step max(step, exchange) + the pairwise
    average (3 shards through HBM), bytes those of one-peer gossip, as fast as synchronous one-peer
    gossip (no one waits when no one is slower).  Exchange-bound, the NICs also carry the replica's
    own pipeline sends beside the exchange: the step is then their busy time (link_bound.py)."""
    for over in ({}, {"cluster.scale_out.nic_Gbps": 10}):        # compute-bound, then exchange-bound
        res = _run("gossip-async", **over)
        x = res.exchange
        assert x.kind == "gossip-async" and x.peers == 1 and x.asynchronous
        rep = simulate(replica_scenario(res.scenario))
        shard = rep.memory.params / 2 * 4       # fp32 payload
        gpu = res.scenario.hardware.gpu
        avg = 3 * shard / (gpu.hbm_GBps * 1e9 * hbm_efficiency(gpu))       # at HBM's achieved rate
        nics = step_busy(res.scenario, rep, x.mean_bytes_per_gpu)["scale-out"]
        assert res.iteration_time_s == pytest.approx(max(max(x.step_s, x.exchange_s) + avg, nics), rel=1e-12)
        bound = bool(nics > max(x.step_s, x.exchange_s) + avg)
        assert ("link" in res.warning_kinds) == bound == bool(over)
        assert res.time_per_step_s == res.iteration_time_s
        one_peer = _run("gossip-exponential", **{"parallelism.gossip_peers": 1}, **over)
        for tier in ("scale-up", "scale-out"):      # one model each way leaves the GPU and its node
            assert x.bytes_per_gpu[tier] == one_peer.exchange.bytes_per_gpu[tier]
        # Replica 0's neighbour r-1 lies across the spine, r+1 does not: one of them at random.
        ring = _run("gossip-ring", **over).exchange.bytes_per_gpu
        assert x.bytes_per_gpu["spine"] == ring["spine"] / 2 > 0
        assert res.iteration_time_s == pytest.approx(one_peer.iteration_time_s, rel=1e-12)
        assert x.fastest_replica_step_s == x.slowest_replica_step_s == res.iteration_time_s
        assert x.samples_per_s == pytest.approx(res.scenario.training.global_batch / res.iteration_time_s)
        assert sum(res.breakdown_s.values()) == pytest.approx(res.iteration_time_s, rel=1e-9)
        assert res.replicas == ()
    assert x.exchange_s > x.step_s           # 10 Gb/s: communication-bound, at the exchange's rate


def test_async_gossip_runs_each_replica_at_its_own_pace():
    """8 replicas, one at half speed: AD-PSGD processes 7 + 1/2 replica batches per cycle of the
    others, (7 + 1/2)/8 of the throughput without the straggler; synchronous gossip halves it."""
    even, slow = _eight("gossip-async"), _eight("gossip-async", **ONE_STRAGGLER)
    x = slow.exchange
    assert x.slowest_replica_step_s == pytest.approx(2 * x.fastest_replica_step_s, rel=1e-12)
    assert x.fastest_replica_step_s == pytest.approx(even.iteration_time_s, rel=1e-12)
    assert x.samples_per_s / even.exchange.samples_per_s == pytest.approx((7 + 1 / 2) / 8, rel=1e-12)
    # The time per step is the equivalent global batch's: B over the aggregate throughput.
    assert slow.iteration_time_s == pytest.approx(even.iteration_time_s * 8 / 7.5, rel=1e-12)
    assert slow.tokens_per_s / even.tokens_per_s == pytest.approx(7.5 / 8, rel=1e-12)
    for sync in ("gossip-ring", "gossip-exponential"):
        assert _eight(sync, **ONE_STRAGGLER).exchange.samples_per_s / _eight(sync).exchange.samples_per_s \
            == pytest.approx(1 / 2, rel=1e-12)
    assert all(row["wait_s"] == 0.0 for row in slow.replicas) and "straggler" not in slow.warning_kinds
    assert sum(slow.breakdown_s.values()) == pytest.approx(slow.iteration_time_s, rel=1e-12)


def test_async_throughput_is_the_sum_of_the_replicas_rates():
    """Without the ideal pipeline (TP, PP and the optimizer are not slowed): sequences per second =
    sum over kinds of replicas x (B/dp) / own cycle, and the time per step B over that."""
    res = _run("gossip-async", **ONE_STRAGGLER)
    sc, x = res.scenario, res.exchange
    per_replica = sc.training.global_batch / sc.dp
    rate = sum(row["replicas"] * per_replica / row["iteration_time_s"] for row in res.replicas)
    assert x.samples_per_s == pytest.approx(rate, rel=1e-12)
    assert res.iteration_time_s == pytest.approx(sc.training.global_batch / rate, rel=1e-12)
    cycles = sorted(row["iteration_time_s"] for row in res.replicas)
    assert (x.fastest_replica_step_s, x.slowest_replica_step_s) == (cycles[0], cycles[-1])
    assert x.fastest_replica_step_s < res.iteration_time_s < x.slowest_replica_step_s
    assert sum(res.breakdown_s.values()) == pytest.approx(res.iteration_time_s, rel=1e-12)
    sync = _run("gossip-ring", **ONE_STRAGGLER)
    assert sync.iteration_time_s == pytest.approx(max(r["iteration_time_s"] for r in sync.replicas))


def test_async_exchange_in_run_json():
    """``run --json``: dp_exchange carries the fastest and slowest replica cycles and the aggregate
    throughput, and the app rebuilds the exchange from it."""
    import json

    from explorer.variants.lowcomm.decentral import Exchange
    out = json.loads(json.dumps(_eight("gossip-async", **ONE_STRAGGLER).to_json_dict()))
    x = out["dp_exchange"]
    assert x["kind"] == "gossip-async" and "ICML 2018" in x["quality"] and "staleness" in x["quality"]
    assert x["slowest_replica_step_s"] == pytest.approx(2 * x["fastest_replica_step_s"], rel=1e-12)
    assert out["time_per_step_s"] == pytest.approx(x["global_batch"] / x["samples_per_s"], rel=1e-12)
    assert Exchange(**x).asynchronous


def test_the_estimator_leaves_async_gossip_to_the_simulation():
    from explorer.estimate.many import estimate, needs_simulation  # needs_simulation: variants/registry.py
    sc = load(EIGHT, {**EIGHT_REPLICAS, "parallelism.dp_kind": "gossip-async", **ONE_STRAGGLER})
    assert needs_simulation(sc)
    assert estimate(sc).iteration_time_s[0] == simulate(sc).iteration_time_s


@pytest.mark.parametrize("over, field", [
    ({}, "parallelism.zero"),                                           # ZeRO-1 as shipped
    ({"parallelism.zero": 3}, "parallelism.zero"),
    ({"parallelism.zero": 0, "parallelism.gossip_peers": 2}, "parallelism.gossip_peers"),
    ({"parallelism.zero": 0, "training.sync.kind": "diloco"}, "parallelism.dp_kind"),
    ({"parallelism.zero": 0, "training.global_batch": 1000}, "training.global_batch"),
    ({"parallelism.zero": 0, "training.sync.outer_dtype": "bf16", "communication.compression.kind": "fp16"},
     "training.sync.outer_dtype"),
])
def test_async_gossip_refusals_name_their_field(over, field):
    with pytest.raises(ScenarioError) as e:
        load(TD, {"parallelism.dp_kind": "gossip-async", **over})
    assert e.value.field == field and "\n" not in str(e.value)


@pytest.mark.parametrize("over, field", [
    ({"parallelism.dp": 1, "parallelism.pp": 8}, "parallelism.dp_kind"),     # one replica
    ({"model.preset": "mixtral-8x7b", "parallelism.ep": 2}, "parallelism.dp_kind"),
])
def test_async_gossip_needs_whole_replicas(over, field):
    with pytest.raises(ScenarioError) as e:
        load(EIGHT, {**EIGHT_REPLICAS, "parallelism.dp_kind": "gossip-async", **over})
    assert e.value.field == field


@pytest.mark.parametrize("kind", ["gossip-ring", "gossip-exponential", "gossip-async"])
def test_degraded_nodes_slow_the_exchange_through_their_nics(kind):
    """cluster.faults: a GPU on a degraded node (or sending to one) crosses the scale-out fabric at
    nic_factor of its share, and the exchange waits for the slowest transfer (D-PSGD: every
    neighbour's model).  Two-datacenters' layout on one
    datacenter, 4 of 32 nodes degraded: the exchange, bandwidth-bound, takes 1/f as long (to the
    per-call latency's 0.1 %); a replica holding the degraded nodes runs alone where it used to
    be refused (4 degraded nodes of its 4)."""
    base = _run(kind).exchange
    for f in (0.5, 0.25):
        x = _run(kind, **{"cluster.faults.degraded_nodes": 4, "cluster.faults.nic_factor": f}).exchange
        assert x.exchange_s == pytest.approx(base.exchange_s / f, rel=1e-3)
    # Degraded nodes at full speed (nic_factor 1) change nothing.
    same = _run(kind, **{"cluster.faults.degraded_nodes": 4, "cluster.faults.nic_factor": 1.0}).exchange
    assert same.exchange_s == base.exchange_s


def test_a_parameter_server_waits_for_the_last_push_from_a_degraded_node():
    """scenarios/parameter-server.yaml, whose pushes (not the servers' NICs: 48 % busy) bound the
    exchange: with one node's NICs at half rate its pushes take twice as long and so does the
    exchange, the servers' NICs then half as busy; on two-datacenters' layout the servers' NICs
    bound it, and a degraded worker node changes nothing."""
    ps = ROOT / "scenarios" / "parameter-server.yaml"
    base = simulate(load(ps)).exchange
    slow = simulate(load(ps, {"cluster.faults.degraded_nodes": 1, "cluster.faults.nic_factor": 0.5})).exchange
    assert slow.exchange_s == pytest.approx(2 * base.exchange_s, rel=1e-3)
    assert slow.server_nic_utilisation < base.server_nic_utilisation
    bound = _run("parameter-server").exchange
    same = _run("parameter-server", **{"cluster.faults.degraded_nodes": 4,
                                       "cluster.faults.nic_factor": 0.5}).exchange
    assert same.exchange_s == bound.exchange_s
