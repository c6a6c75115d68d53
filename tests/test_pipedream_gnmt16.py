"""PipeDream's GNMT-16 on its slow cluster (issue 36, item 3; Narayanan et al., "PipeDream:
Generalized Pipeline Parallelism for DNN Training", SOSP 2019, Table 1: GNMT-16 on Cluster-A,
4 servers x 4 V100, 10 Gbps Ethernet, configuration "Straight" — 16 unreplicated stages — 2.34x
faster per epoch than data parallelism).  The shipped scenario runs the straight pipeline;
``DATA_PARALLEL`` is the same GPUs, 1,024 sentences a step, 64 per GPU."""
from __future__ import annotations

import pytest

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

SCENARIO = ROOT / "scenarios" / "pipedream-gnmt16.yaml"
PAPER_SPEEDUP = 2.34          # PipeDream, SOSP 2019, Table 1: GNMT-16, 4x4 (A), Straight (epoch time)
TOLERANCE = 0.30              # issue 36: within 30 % of the paper's factor
DATA_PARALLEL = {"parallelism.pp": 1, "parallelism.dp": 16, "parallelism.schedule": "1f1b"}


def _speedup(**over) -> float:
    pipe = simulate(load(SCENARIO, over))
    dp = simulate(load(SCENARIO, {**DATA_PARALLEL, **over}))
    return pipe.samples_per_s / dp.samples_per_s


def test_the_straight_pipelines_speedup_is_the_measured_one():
    """Ours 5.51x in fp16 (2,846 against 516 sentences/s) and 1.15x in fp32 (515 against 449): the
    figures the expected failures below name, held so that a change to either is seen."""
    assert _speedup() == pytest.approx(5.514, rel=0.01)
    assert _speedup(**{"training.dtype": "fp32"}) == pytest.approx(1.147, rel=0.01)


@pytest.mark.xfail(strict=True, reason=(
    "ours over-states the paper's 2.34x: 5.51x (2,846 against 516 sentences/s) in fp16, since a "
    "flow crossing each of the three 10 GbE boundaries has its server's NIC whole (NCCL's "
    "ncclTopoGetLocalNet) and the sends hide under the compute (20 ms of exposed pp a 360 ms "
    "iteration); not modelled: a middle server sends the next stage's activations and the previous "
    "stage's gradients at once through its one NIC's transmit side (counting both: about 0.546 s, "
    "1,875 sentences/s, 3.6x), and PipeDream's inter-server sends were single TCP flows (Gloo), "
    "which may not reach 10 GbE's line rate"))
def test_the_straight_pipeline_beats_data_parallelism_by_the_papers_factor():
    assert abs(_speedup() / PAPER_SPEEDUP - 1) <= TOLERANCE


@pytest.mark.xfail(strict=True, reason=(
    "in fp32, the precision PipeDream trained in, on the V100's CUDA cores (14 TFLOPS), ours gives "
    "1.15x (515 against 449 sentences/s), under the paper's 2.34x: the pipeline is paced by its last "
    "stage's compute (1,988 ms an iteration, no exposed pp, the same at 100 Gbps), so the unmodelled "
    "send effects that explain fp16's over-statement (both directions through one NIC, single TCP "
    "flows) could not raise it; the shortfall is left open"))
def test_in_fp32_the_straight_pipeline_beats_data_parallelism_by_the_papers_factor():
    assert abs(_speedup(**{"training.dtype": "fp32"}) / PAPER_SPEEDUP - 1) <= TOLERANCE


def test_data_parallelism_is_bandwidth_bound_and_the_pipeline_sends_no_gradients():
    """DP all-reduces 277.7M fp32 gradients through one 10 GbE NIC a server: the ring sends
    2 (n - 1) / n x 4 bytes x params per GPU; the straight pipeline has no replicas to reduce."""
    dp = simulate(load(SCENARIO, DATA_PARALLEL))
    assert dp.comm_bytes_per_gpu["dp"] == pytest.approx(2 * 15 / 16 * 4 * 277_718_593, rel=1e-3)
    assert dp.breakdown_s["dp"] > 10 * dp.breakdown_s["compute"]
    pipe = simulate(load(SCENARIO))
    assert pipe.comm_bytes_per_gpu["dp"] == 0.0 and pipe.comm_bytes_per_gpu["pp"] > 0.0


def test_a_faster_network_shrinks_the_advantage():
    """PipeDream, Sec. 5: the slower the network, the more pipelining gains over data parallelism."""
    slow = _speedup()
    fast = _speedup(**{"cluster.scale_out.nic_Gbps": 25})
    fastest = _speedup(**{"cluster.scale_out.nic_Gbps": 100})
    assert slow > fast > fastest and fastest == pytest.approx(1.0, abs=0.1)


def _said(x: float) -> str:
    return f"{x:,.0f}"


def test_the_description_quotes_our_figures():
    """Every figure the scenario's description quotes for ours is the run's (a hunt found the
    network and partitioner figures a few sentences/s stale)."""
    text = " ".join(load(SCENARIO).description.split())
    pipe, dp = simulate(load(SCENARIO)), simulate(load(SCENARIO, DATA_PARALLEL))
    assert f"**{_said(pipe.samples_per_s)} sentences/s against {_said(dp.samples_per_s)}**" in text
    assert f"{dp.breakdown_s['dp'] * 1e3:,.0f} ms of a {dp.iteration_time_s * 1e3:,.0f} ms step" in text
    assert f"compute {dp.breakdown_s['compute'] * 1e3:.0f} ms." in text
    assert (f"({pipe.breakdown_s['pp'] * 1e3:.0f} ms of exposed pp a {pipe.iteration_time_s * 1e3:.0f} ms "
            f"iteration, compute {pipe.breakdown_s['compute'] * 1e3:.0f} ms") in text
    assert f"MFU {pipe.mfu * 100:.1f} %" in text
    for gbps, said in ((25, "at 25 Gbps (`cluster.scale_out.nic_Gbps: 25`)"), (100, "at 100 Gbps")):
        a = simulate(load(SCENARIO, {"cluster.scale_out.nic_Gbps": gbps}))
        b = simulate(load(SCENARIO, {**DATA_PARALLEL, "cluster.scale_out.nic_Gbps": gbps}))
        assert (f"{said} {_said(a.samples_per_s)} against {_said(b.samples_per_s)}"
                + (" sentences/s" if gbps == 25 else "")
                + f" ({a.samples_per_s / b.samples_per_s:.2f}x)") in text
    four = simulate(load(SCENARIO, {"parallelism.pp": 4, "parallelism.stage_replicas": "auto"}))
    split = " | ".join(map(str, four.stage_layers))
    assert (f"{split} split: {_said(four.samples_per_s)} sentences/s "
            f"({four.samples_per_s / dp.samples_per_s:.2f}x)") in text
    flush = simulate(load(SCENARIO, {"parallelism.schedule": "1f1b"}))
    assert f"gives {_said(flush.samples_per_s)} ({flush.samples_per_s / dp.samples_per_s:.2f}x)" in text
