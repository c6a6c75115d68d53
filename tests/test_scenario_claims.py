"""Every checkable claim of every shipped scenario's description, one test per claim (issue 7.6).

Each test quotes in its docstring the sentence it checks.  Directions are asserted strictly;
"about X" holds within a stated tolerance, loose enough for calibration drift in the simulator
core, tight enough that a physical change (a different limiting link, a lost overlap, another
placement) breaks it.  Overrides are applied as the app's sidebar does: dp follows
GPUs / (tp·pp·cp) when one of those changes.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from explorer.scenario import SETTABLE, SETTABLE_ROOTS, load, load_raw
from explorer.simulate import simulate, stage_passes
from explorer.taskgraph.make import iteration_builder
from explorer.teaching.bubble import explain_bubble

SCEN = Path(__file__).resolve().parent.parent / "scenarios"
NAMES = sorted(p.stem for p in SCEN.glob("*.yaml"))


def _with_derived_dp(name: str, overrides: dict) -> dict:
    """The sidebar derives dp = GPUs / (tp·pp·cp); do the same when tp, pp or cp move."""
    ov = dict(overrides)
    resizing = ("parallelism.tp", "parallelism.pp", "parallelism.cp")
    if "parallelism.dp" not in ov and any(k in ov for k in resizing):
        raw = load_raw(SCEN / f"{name}.yaml")
        par, cl = raw.get("parallelism", {}), raw["cluster"]
        deg = 1
        for d in ("tp", "pp", "cp"):
            deg *= ov.get(f"parallelism.{d}", par.get(d, 1))
        nodes = ov.get("cluster.nodes", cl["nodes"])          # a bullet may resize the cluster too
        ov["parallelism.dp"] = nodes * cl["gpus_per_node"] // deg
    return ov


@functools.cache
def _sim(name: str, overrides: tuple = ()):
    return simulate(load(SCEN / f"{name}.yaml", _with_derived_dp(name, dict(overrides))))


def sim(name: str, ov: dict | None = None):
    """A shipped scenario simulated with dotted-key overrides ``ov`` (cached)."""
    return _sim(name, tuple(sorted((ov or {}).items())))


def about(x: float, target: float, rel: float) -> bool:
    return abs(x - target) <= rel * abs(target)


def ratio(a: float, b: float) -> float:
    return a / b


# --------------------------------------------------------------------------- generic


def _backticked(desc: str) -> list[str]:
    return re.findall(r"`([^`]+)`", desc)


_KEY = re.compile(r"^([a-z_]+(?:\.[A-Za-z_]+)+)(?::\s*(.+))?$")


@pytest.mark.parametrize("name", NAMES)
def test_every_dotted_key_in_a_description_is_a_real_field(name):
    """Every `a.b.c` key a description names is a field the sidebar or `--set` reaches."""
    desc = load_raw(SCEN / f"{name}.yaml")["description"]
    keys = [m.group(1) for s in _backticked(desc) if (m := _KEY.match(s.strip()))]
    assert keys, f"{name}: the description names no control"
    unknown = [k for k in keys if k not in SETTABLE and k not in SETTABLE_ROOTS]
    assert not unknown, f"{name}: {unknown} are not scenario fields"


def _suggestions(desc: str) -> list[tuple[dict, dict]]:
    """(override, the other overrides of the same bullet) for every `key: value` suggested."""
    out = []
    for block in re.split(r"\n\s*\n|\n(?=- )", desc):   # paragraphs and bullets
        found = [m for s in _backticked(block) if (m := _KEY.match(s.strip())) and m.group(2) is not None]
        sets = [{m.group(1): yaml.safe_load(m.group(2))} for m in found]
        merged = {k: v for d in sets for k, v in d.items()}
        out += [(d, merged) for d in sets]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_suggested_override_loads(name):
    """Every `key: value` a description suggests loads — alone, or together with the settings its
    bullet names beside it (e.g. `parallelism.schedule: 1f1b` with `parallelism.vpp: 1`)."""
    desc = load_raw(SCEN / f"{name}.yaml")["description"]
    sugg = _suggestions(desc)
    assert sugg, f"{name}: the description suggests no setting"
    for ov, bullet in sugg:
        try:
            load(SCEN / f"{name}.yaml", _with_derived_dp(name, ov))
        except Exception:
            load(SCEN / f"{name}.yaml", _with_derived_dp(name, bullet))  # raises if still invalid


@pytest.mark.parametrize("name", NAMES)
def test_no_warning_advises_keeping_a_dimension_inside_one_datacenter(name):
    """Warnings follow from the simulated outcome: none gives placement advice as a rule of thumb."""
    for w in sim(name).warnings:
        assert not re.search(r"\b(keep|move|put)\b.{0,60}\b(inside|within|one)\b.{0,20}"
                             r"(datacenter|building)", w, re.I), w


# --------------------------------------------------------------------------- two-datacenters

TD = "two-datacenters"


def test_two_datacenters_setup_tp_in_node_pp_in_building_dp_across_wan():
    """TP 8 stays in each node and PP 4 inside each building; data parallelism (DP 32) spans both
    datacenters, so every ZeRO-1 gradient reduce-scatter and parameter all-gather has to cross the WAN."""
    r = sim(TD)
    sc = r.scenario
    assert sc.gpus == 1024 and sc.cluster.datacenters == 2
    assert sc.cluster.scale_across.bandwidth_Gbps == 1600 and sc.cluster.scale_across.latency_ms == 2
    assert r.links["tp"]["tier"] == "scale-up"
    assert r.comm_bytes_by_tier["pp"]["scale-across"] == 0
    assert r.links["dp"]["tier"] == "scale-across" and r.links["dp"]["group"] == 32
    assert r.comm_bytes_by_tier["dp"]["scale-across"] > 0


def test_two_datacenters_bottleneck_names_the_wan_at_about_40_percent():
    """The bottleneck sentence names that link: exposed DP takes about 44% (3.5 s) of the 8.0 s
    iteration."""
    r = sim(TD)
    assert r.bottleneck.startswith("DP takes") and "WAN" in r.bottleneck
    assert about(r.breakdown_s["dp"] / r.iteration_time_s, 0.44, 0.05)
    assert about(r.breakdown_s["dp"], 3.5, 0.03) and about(r.iteration_time_s, 8.0, 0.03)


def test_two_datacenters_both_zero1_collectives_are_limited_by_the_wan():
    """the reduce-scatter and all-gather of ZeRO-1 are limited by the WAN, whose bandwidth all 32
    DP groups share at once (about 4 GB/s of bus bandwidth each); the reduce-scatter carries fp32
    gradients (Megatron reduces bf16 gradients in fp32), twice the bytes of the all-gather."""
    r = sim(TD)
    assert r.scenario.training.framework == "megatron" and r.scenario.training.dtype == "bf16"
    assert r.links["dp"]["op"] == "reduce-scatter" and r.links["dp"]["tier"] == "scale-across"
    dp = [t.info for t in r.tasks if t.kind == "dp"]
    assert {i.op for i in dp} == {"reduce-scatter", "all-gather"}
    assert all(i.tier == "scale-across" for i in dp)
    sent = {op: sum(i.bytes for i in dp if i.op == op) for op in ("reduce-scatter", "all-gather")}
    assert about(sent["reduce-scatter"] / sent["all-gather"], 2, 0.02)
    # 32 groups share the WAN's 200 GB/s: each call gets less than a 32nd of it.
    assert r.links["dp"]["busbw_GBps"] < 200 / 32 and about(r.links["dp"]["busbw_GBps"], 4, 0.1)


def test_two_datacenters_auto_picks_nccl_ring_with_a_16th_across_the_wan():
    """`auto` picks the ring, as NCCL would for a reduce-scatter or all-gather between nodes. Two of
    the ring's 32 hops join the buildings, so each GPU sends on average 1/16 of its DP bytes across."""
    r = sim(TD)
    assert r.scenario.communication.library == "nccl"
    assert {t.info.algorithm for t in r.tasks if t.kind == "dp"} == {"ring"}
    share = r.comm_bytes_by_tier["dp"]["scale-across"] / r.comm_bytes_per_gpu["dp"]
    assert about(share, 1 / 16, 0.02)


def test_two_datacenters_ring_pays_wan_latency_once_per_bucket():
    """The ring is pipelined, so each 40 MB bucket pays the 2 ms WAN latency once, not at each of
    its 31 steps: about 0.7 s in all (`cluster.scale_across.latency_ms: 0` gives 7.3 s)."""
    r, no_lat = sim(TD), sim(TD, ov={"cluster.scale_across.latency_ms": 0})
    assert about(no_lat.iteration_time_s, 7.3, 0.02)
    lat_part = r.breakdown_s["dp"] - no_lat.breakdown_s["dp"]
    assert about(lat_part, 0.7, 0.05)
    shown = r.breakdown_class                                # the class the breakdown shows
    buckets = sum(t.info.buckets for t in r.tasks if t.kind == "dp" and t.cls == shown)
    assert about(lat_part, buckets * 2e-3, 0.05)          # once per bucket, not 31 times


def test_two_datacenters_mpi_halving_doubling_sends_half_across_and_is_faster():
    """What MPI would do (`communication.library: mpi`): halving-doubling crosses the WAN only in its
    smallest step, 1/31 of the DP bytes — half the ring's — so exposed DP drops 3.5 -> 2.5 s and the
    iteration 8.0 -> 6.9 s."""
    ring, mpi = sim(TD), sim(TD, ov={"communication.library": "mpi"})
    assert {t.info.algorithm for t in mpi.tasks if t.kind == "dp"} == {"halving-doubling"}
    share = mpi.comm_bytes_by_tier["dp"]["scale-across"] / mpi.comm_bytes_per_gpu["dp"]
    assert about(share, 1 / 31, 0.01)
    assert about(ratio(ring.comm_bytes_by_tier["dp"]["scale-across"],
                       mpi.comm_bytes_by_tier["dp"]["scale-across"]), 2, 0.05)
    assert about(mpi.breakdown_s["dp"], 2.5, 0.03) and about(mpi.iteration_time_s, 6.9, 0.02)


def test_two_datacenters_hierarchical_sends_no_less_and_is_not_faster_than_mpi():
    """Forcing `communication.algorithm: hierarchical` (reduce inside each building first) sends no
    less across and is no faster (6.88 s against 6.87 s)."""
    mpi = sim(TD, ov={"communication.library": "mpi"})
    hier = sim(TD, ov={"communication.algorithm": "hierarchical"})
    assert {t.info.algorithm for t in hier.tasks if t.kind == "dp"} == {"hierarchical"}
    assert (hier.comm_bytes_by_tier["dp"]["scale-across"]
            >= mpi.comm_bytes_by_tier["dp"]["scale-across"] * 0.999)
    assert mpi.iteration_time_s <= hier.iteration_time_s < mpi.iteration_time_s * 1.005
    assert about(hier.iteration_time_s, 6.88, 0.001) and about(mpi.iteration_time_s, 6.87, 0.001)


def test_two_datacenters_more_wan_bandwidth_shrinks_exposed_dp():
    """Raise `cluster.scale_across.bandwidth_Gbps` (3200: exposed DP 3.5 -> 2.4 s)"""
    base, fast = sim(TD), sim(TD, ov={"cluster.scale_across.bandwidth_Gbps": 3200})
    assert fast.breakdown_s["dp"] < base.breakdown_s["dp"]
    assert about(base.breakdown_s["dp"], 3.5, 0.03) and about(fast.breakdown_s["dp"], 2.4, 0.03)


def test_two_datacenters_one_datacenter_shrinks_exposed_dp():
    """or set `cluster.datacenters: 1` (0.43 s), and watch the exposed DP time shrink."""
    one = sim(TD, ov={"cluster.datacenters": 1})
    assert one.breakdown_s["dp"] < sim(TD).breakdown_s["dp"] / 5
    assert about(one.breakdown_s["dp"], 0.43, 0.05)
    assert "wan" not in one.warning_kinds


def test_two_datacenters_pp_across_the_wan_is_faster_and_only_activations_cross():
    """Put PP across the buildings instead (`parallelism.order: tp-cp-dp-pp`): only the pipeline's
    activations (and their gradients) cross the WAN, DP stays inside each building, and the
    iteration drops from 8.0 to 5.5 s — although the WAN now shows as about 0.06 s of exposed `pp`
    time and a larger bubble. Only the 256 GPUs of the stage before the cut send across, so each
    flow gets a 256th of the link (26 ms per 16.8 MB transfer with the 2 ms)."""
    base, ppx = sim(TD), sim(TD, ov={"parallelism.order": "tp-cp-dp-pp"})
    assert ppx.iteration_time_s < base.iteration_time_s and about(base.iteration_time_s, 8.0, 0.03)
    assert about(ppx.iteration_time_s, 5.5, 0.01)
    across = {d: t["scale-across"] for d, t in ppx.comm_bytes_by_tier.items()}
    assert across["pp"] > 0 and all(v == 0 for d, v in across.items() if d != "pp")
    assert ppx.links["pp"]["tier"] == "scale-across"
    assert about(ppx.breakdown_s["pp"], 0.06, 0.05)
    wan = {round(t.duration, 5) for t in ppx.tasks if t.kind == "pp" and t.duration > 5e-3}
    # 2 ms + 16.8 MB at 1.6 Tb/s x the WAN's efficiency / 256 flows (a 512th, all of a building's
    # GPUs, would be 50 ms)
    assert len(wan) == 1 and about(wan.pop(), 0.0259, 0.005)
    assert ppx.breakdown_s["bubble"] > base.breakdown_s["bubble"]


def test_two_datacenters_no_warning_contradicts_pp_across_being_faster():
    """Warnings follow from the outcome: none tells the user to keep PP inside one datacenter
    while putting it across is the faster layout."""
    base, ppx = sim(TD), sim(TD, ov={"parallelism.order": "tp-cp-dp-pp"})
    assert ppx.iteration_time_s < base.iteration_time_s
    for w in base.warnings + ppx.warnings:
        assert not re.search(r"(keep|inside|within).{0,40}(pp|pipeline)"
                             r"|(pp|pipeline).{0,40}(inside|within) one", w, re.I), w


def test_two_datacenters_p3_cuts_exposed_dp_by_a_third():
    """Bucket priorities (`communication.dp_priority: true`, P3 / ByteScheduler): ... the exposed DP
    time drops by 30% (3.5 -> 2.5 s)."""
    base, p3 = sim(TD), sim(TD, ov={"communication.dp_priority": True})
    assert about(ratio(p3.breakdown_s["dp"], base.breakdown_s["dp"]), 0.7, 0.02)
    assert about(p3.breakdown_s["dp"], 2.5, 0.03)
    assert p3.iteration_time_s < base.iteration_time_s


# --------------------------------------------------------------------------- teaching-8gpu

TE = "teaching-8gpu"


def test_teaching_staircase_last_stage_waits_three_forwards():
    """stage 0 starts first and stage 3 waits (p-1) = 3 forward passes before its first micro-batch
    arrives."""
    r = sim(TE)
    first = {}
    for t in r.tasks:
        if t.kind == "forward" and t.info.micro_batch == 0:
            first[r.classes[t.cls].stage] = t
    assert first[0].start == 0
    ahead = sum(first[s].duration for s in range(3))
    assert first[3].start >= ahead * 0.999


def test_teaching_formula_is_3_over_11():
    """(p-1)/(m+p-1) = 3/11 = 27% of the iteration with 1F1B and equal stages."""
    assert sim(TE).bubble_formula == pytest.approx(3 / 11)


def test_teaching_card_a_little_above_formula_busiest_about_24():
    """the layers split [6, 7, 7, 4]; the Bubble card (idle share averaged over the 4 stages) reads
    about 28%, a little above the formula, while the busiest stage idles about 24% (on hover)."""
    r = sim(TE)
    assert tuple(r.stage_layers) == (6, 7, 7, 4)
    assert r.bubble_formula < r.bubble_fraction < r.bubble_formula + 0.04
    assert abs(r.bubble_fraction - 0.28) <= 0.01
    assert abs(r.bubble_fraction_busiest - 0.24) <= 0.01


def test_teaching_ideal_pipeline_card_equals_formula():
    """`parallelism.ideal_pipeline: true` (equal stages, free communication) makes card and formula
    agree at 27.3%."""
    r = sim(TE, ov={"parallelism.ideal_pipeline": True})
    assert r.bubble_fraction == pytest.approx(r.bubble_formula, abs=1e-6) == pytest.approx(3 / 11)


def test_teaching_pp_lane_carries_activations_over_nvlink():
    """the `pp` lane shows the activations and gradients handed between stages over NVLink."""
    r = sim(TE)
    assert r.comm_bytes_per_gpu["pp"] > 0 and r.links["pp"]["tier"] == "scale-up"
    assert any(t.kind == "pp" for t in r.tasks)


def test_teaching_dp_overlapped_on_nvlink_and_dp_overlap_false_exposes_about_8ms():
    """the two replicas of each stage all-reduce their gradients over NVLink in the `dp` lane ...
    only about 1.7 ms stays exposed; `communication.dp_overlap: false` makes it about 7.9 ms
    (Megatron all-reduces bf16 gradients in fp32: 1.4 GB per GPU, twice their bf16 size)."""
    r, off = sim(TE), sim(TE, ov={"communication.dp_overlap": False})
    assert r.links["dp"]["tier"] == "scale-up" and r.links["dp"]["op"] == "all-reduce"
    assert about(r.breakdown_s["dp"], 1.7e-3, 0.05)
    assert off.breakdown_s["dp"] > r.breakdown_s["dp"]
    assert about(off.breakdown_s["dp"], 7.9e-3, 0.05)
    c = r.breakdown_class
    sent = sum(t.info.bytes for t in r.tasks if t.kind == "dp" and t.cls == c)
    assert about(sent / 1e9, 1.4, 0.03) and about(sent, 2 * r.memory_by_class[c].params, 0.01)


def test_teaching_gpipe_same_formula_card_within_a_point_more_memory():
    """`parallelism.schedule: gpipe` (same formula, the card moves by under a point, peak memory
    11.9 -> 15.6 GB)"""
    r, g = sim(TE), sim(TE, ov={"parallelism.schedule": "gpipe"})
    assert g.bubble_formula == r.bubble_formula
    assert abs(g.bubble_fraction - r.bubble_fraction) < 0.01
    assert g.memory.total > r.memory.total
    assert about(r.memory.total / 1e9, 11.9, 0.05) and about(g.memory.total / 1e9, 15.6, 0.05)


def test_teaching_global_batch_64_shrinks_bubble():
    """`training.global_batch: 64` (32 micro-batches: formula 3/35 = 8.6%, card about 13%)"""
    r, big = sim(TE), sim(TE, ov={"training.global_batch": 64})
    assert big.bubble_formula == pytest.approx(3 / 35)
    assert big.bubble_fraction < r.bubble_fraction
    assert abs(big.bubble_fraction - 0.13) <= 0.01


def test_teaching_pp2_formula_one_fifth():
    """`parallelism.pp: 2` (dp becomes 4 and m = 4: formula 1/5 = 20%, card about 16%)."""
    r = sim(TE, ov={"parallelism.pp": 2})
    assert r.scenario.parallelism.dp == 4
    assert r.bubble_formula == pytest.approx(1 / 5)
    assert abs(r.bubble_fraction - 0.16) <= 0.01


def test_teaching_token_slices_act_like_4x_micro_batches():
    """(`parallelism.token_slices: 4`, TeraPipe): the formula becomes that of 4x the micro-batches
    (3/35 = 8.6%) and the card drops to about 13%, as with `training.global_batch: 64`."""
    ts, big = sim(TE, ov={"parallelism.token_slices": 4}), sim(TE, ov={"training.global_batch": 64})
    assert ts.bubble_formula == pytest.approx(3 / 35) == pytest.approx(big.bubble_formula)
    assert ts.bubble_fraction < sim(TE).bubble_fraction
    assert abs(ts.bubble_fraction - 0.13) <= 0.01
    assert abs(ts.bubble_fraction - big.bubble_fraction) <= 0.02


# --------------------------------------------------------------------------- megatron-gpt3-175b

MG = "megatron-gpt3-175b"


def test_megatron_about_140_to_150_tflops():
    """The paper estimates about 140 TFLOP/s per GPU for this run ...; the simulation gives about 150."""
    r = sim(MG)
    assert about(r.tflops_per_gpu, 150, 0.07)
    assert about(r.tflops_per_gpu, 140, 0.15)


def test_megatron_recompute_is_about_32_percent_of_compute():
    """Recompute runs the whole forward pass again inside every backward — about 32% of the compute
    (5.7 s against 17.8 s), a little less than the third that a backward of exactly twice the
    forward would give: the backward costs more, not least because its weight-gradient GEMMs also
    pay the fp32 gradient-accumulation epilogue"""
    bd = sim(MG).breakdown_s
    assert bd["recompute"] / bd["compute"] < 1 / 3
    assert about(bd["recompute"] / bd["compute"], 0.32, 0.08)
    assert about(bd["recompute"], 5.7, 0.08) and about(bd["compute"], 17.8, 0.08)


def test_megatron_hardware_tflops_above_model_flops():
    """`tflops_per_gpu` (hardware FLOPs, 150) is higher than the model FLOP/s behind MFU (36% of
    the 312 TFLOP/s peak, about 113)."""
    r = sim(MG)
    peak = r.scenario.hardware.gpu.peak_tflops
    assert peak == 312
    assert r.tflops_per_gpu > r.mfu * peak
    assert abs(r.mfu - 0.36) <= 0.005 and about(r.mfu * peak, 113, 0.01)


def test_megatron_selective_recompute_faster_more_memory():
    """`training.recompute: selective` shortens the iteration from 29.3 to about 22.7 s and raises
    memory from 48 to 78 GB per GPU."""
    r, s = sim(MG), sim(MG, ov={"training.recompute": "selective"})
    assert about(r.iteration_time_s, 29.3, 0.01) and about(s.iteration_time_s, 22.7, 0.01)
    assert about(r.memory.total / 1e9, 48, 0.02) and about(s.memory.total / 1e9, 78, 0.02)


def test_megatron_bubble_formula_7_over_103_card_a_little_less():
    """(p-1)/(m+p-1) = 7/103 = 6.8% for equal stages; the Bubble card ... reads a little less,
    about 6.4%, ... the busiest stage idles about 5%."""
    r = sim(MG)
    assert r.bubble_formula == pytest.approx(7 / 103)
    assert r.bubble_formula - 0.015 < r.bubble_fraction < r.bubble_formula
    assert abs(r.bubble_fraction - 0.064) <= 0.002
    assert abs(r.bubble_fraction_busiest - 0.05) <= 0.01


def test_megatron_bubble_sentence_splits_the_difference():
    """the sentence beside it splits the difference (the embedding and logits add, exposed
    communication takes away)"""
    text = explain_bubble(sim(MG))
    add = re.search(r"logits on stage \d+ ([+-]\d+\.\d) points", text)
    comm = re.search(r"exposed communication ([+-]\d+\.\d) points", text)
    assert add and float(add.group(1)) > 0
    assert comm and float(comm.group(1)) < 0


def test_megatron_tp_is_the_largest_exposed_communication():
    """TP is the largest exposed communication: the bottleneck sentence gives it about 11% of the
    iteration, on NVLink inside each node."""
    r = sim(MG)
    bd = r.breakdown_s
    assert bd["tp"] == max(bd[d] for d in ("tp", "cp", "ep", "pp", "dp"))
    assert r.bottleneck.startswith("TP takes") and r.links["tp"]["tier"] == "scale-up"
    assert abs(bd["tp"] / r.iteration_time_s - 0.11) <= 0.005


def test_megatron_gradient_allreduce_crosses_infiniband_unoverlapped():
    """The gradient all-reduce runs after the backward ... and crosses the InfiniBand fabric
    (about 1.22 s exposed; 1.11 s before NCCL's one-GPU-per-node discounts, tuning.cc)."""
    r = sim(MG)
    assert r.links["dp"]["op"] == "all-reduce" and r.links["dp"]["tier"] == "scale-out"
    assert not r.scenario.communication.dp_overlap
    assert about(r.breakdown_s["dp"], 1.22, 0.03)


def test_megatron_dp_overlap_shrinks_exposed_dp():
    """Try `communication.dp_overlap: true` (exposed DP 1.22 -> 0.86 s)"""
    r, o = sim(MG), sim(MG, ov={"communication.dp_overlap": True})
    assert o.breakdown_s["dp"] < r.breakdown_s["dp"]
    assert about(o.breakdown_s["dp"], 0.86, 0.03)


def test_megatron_interleaved_vpp2_halves_bubble():
    """`parallelism.schedule: interleaved` with `parallelism.vpp: 2` (Bubble card 6.4 -> 3.6%,
    iteration 29.3 -> 28.4 s)."""
    r, i = sim(MG), sim(MG, ov={"parallelism.schedule": "interleaved", "parallelism.vpp": 2})
    assert i.bubble_fraction < r.bubble_fraction and i.iteration_time_s < r.iteration_time_s
    assert abs(i.bubble_fraction - 0.036) <= 0.002
    assert about(i.iteration_time_s, 28.4, 0.01)


# --------------------------------------------------------------------------- llama3-405b-16k

LL = "llama3-405b-16k"


def test_llama_tp_on_nvlink_exposed_about_a_tenth():
    """Its collectives run on NVLink ...: exposed (about 0.7 s, a tenth of the 7.1 s iteration), but fast."""
    r = sim(LL)
    assert r.links["tp"]["tier"] == "scale-up"
    assert about(r.breakdown_s["tp"], 0.7, 0.15) and about(r.iteration_time_s, 7.1, 0.05)


def test_llama_1f1b_formula_is_15_over_31():
    """15/31 = 48% with plain 1F1B"""
    r = sim(LL, ov={"parallelism.schedule": "1f1b", "parallelism.vpp": 1})
    assert r.bubble_formula == pytest.approx(15 / 31)


def test_llama_interleaved_halves_bubble_time_not_share():
    """Interleaving halves the bubble *time* (2.0 s against 4.2 s), so its share of the iteration is
    7.5/23.5 = 32%, not half of 48%; the Bubble card reads about 28%, as exposed communication fills
    part of the idle time."""
    r, o = sim(LL), sim(LL, ov={"parallelism.schedule": "1f1b", "parallelism.vpp": 1})
    assert r.bubble_formula == pytest.approx(7.5 / 23.5)
    assert about(r.breakdown_s["bubble"], 2.0, 0.05) and about(o.breakdown_s["bubble"], 4.2, 0.05)
    assert abs(r.breakdown_s["bubble"] / o.breakdown_s["bubble"] - 0.5) <= 0.05
    assert abs(r.bubble_fraction - 0.28) <= 0.015 and r.bubble_fraction < r.bubble_formula
    assert r.bubble_fraction > 15 / 31 / 2


def test_llama_1f1b_card_about_43_and_slower():
    """Try `parallelism.schedule: 1f1b` with `parallelism.vpp: 1`: the card rises to about 43% (the
    formula's 48% less the exposed communication) and the iteration from 7.1 to 9.7 s."""
    r = sim(LL, ov={"parallelism.schedule": "1f1b", "parallelism.vpp": 1})
    assert abs(r.bubble_fraction - 0.43) <= 0.015 and r.bubble_fraction < r.bubble_formula
    assert r.bubble_fraction > sim(LL).bubble_fraction + 0.1
    assert about(r.iteration_time_s, 9.7, 0.04) and about(sim(LL).iteration_time_s, 7.1, 0.04)


def test_llama_uneven_split_7_8x14_7_and_3_4x30_3():
    """with 1F1B this gives the paper's 7 / 8 x 14 / 7 split of the 126 layers (3 / 4 x 30 / 3 over
    the 32 interleaved chunks here)."""
    assert (tuple(sim(LL, ov={"parallelism.schedule": "1f1b", "parallelism.vpp": 1}).stage_layers)
            == (7,) + (8,) * 14 + (7,))
    assert tuple(sim(LL).stage_layers) == (3,) + (4,) * 30 + (3,)


def test_llama_dp_outermost_crosses_fabric_partly_hidden():
    """each DP group has one member every 16 nodes and its ZeRO-2 collectives cross the fabric. The
    gradient reduce-scatter runs in fp32 (... twice the bytes of the bf16 weight all-gather) and is
    bucketed and overlapped with the backward, but ... the first chunk's buckets end about 0.17 s after
    the last backward, and the weight all-gather holds the first forward about 0.15 s. About 0.35 s
    stays exposed (0.79 s with `communication.dp_overlap: false`)."""
    r = sim(LL)
    assert r.links["dp"]["tier"] == "scale-out" and r.links["dp"]["group"] == 128
    assert r.scenario.parallelism.order.endswith("dp") and r.scenario.parallelism.zero == 2
    busiest = [t for t in r.tasks if t.cls == 1]
    buckets = [t.info for t in busiest if t.stream == "dp"]
    rs = {b.bytes for b in buckets if b.op == "reduce-scatter"}
    ag = {b.bytes for b in buckets if b.op == "all-gather"}
    assert len(rs) == len(ag) == 1 and rs.pop() == pytest.approx(2 * ag.pop(), rel=0.01)
    last_b = max(t.end for t in busiest if t.kind == "backward")
    first_f = min(t.start for t in busiest if t.kind == "forward")
    last_rs = max(t.end for t in busiest if t.stream == "dp")
    assert about(last_rs - last_b, 0.17, 0.15) and about(first_f, 0.15, 0.15)
    assert about(r.breakdown_s["dp"], 0.35, 0.1)
    assert about(sim(LL, ov={"communication.dp_overlap": False}).breakdown_s["dp"], 0.79, 0.1)


def test_llama_zero2_fits_without_recompute_zero0_does_not():
    """with gradients sharded too, the busiest stages need about 77 GB without activation
    recomputation and fit in an H100's 80 GiB = 85.9 GB (the first stage, one layer lighter, 68 GB;
    later stages hold fewer micro-batches in flight, the last 45 GB; ...). With `parallelism.zero: 1`
    every GPU keeps its stage's full gradients, in fp32 (Megatron's main_grad buffer): about
    90 GB on the time-balanced split, so the split moves layers off the first stages, which hold
    the most micro-batches, until every GPU fits with 1 GB to spare (83.3 GB; the iteration 7.1 ->
    8.2 s); with `parallelism.zero: 0` the Adam state is not sharded either: about 128 GB, which
    no split fits, and the memory warning appears."""
    r, z1 = sim(LL), sim(LL, ov={"parallelism.zero": 1})
    per = [m.total / 1e9 for m in r.memory_by_class]
    assert r.scenario.training.recompute == "none" and "memory" not in r.warning_kinds
    assert about(max(per), 77, 0.03) and about(per[0], 68, 0.03) and about(per[-1], 45, 0.03)
    assert per[0] < max(per) and per[-1] == min(per)
    layout = (3, *[4] * 30, 3)                            # the time-balanced split, given
    balanced = sim(LL, ov={"parallelism.zero": 1, "parallelism.pipeline_layout": layout})
    assert about(balanced.memory.total / 1e9, 90, 0.02) and "memory" in balanced.warning_kinds
    assert balanced.memory.grads == pytest.approx(2 * balanced.memory.params, rel=1e-9)  # fp32 vs bf16
    assert about(z1.memory.total / 1e9, 83.3, 0.005) and "memory" not in z1.warning_kinds
    assert z1.stage_layers != balanced.stage_layers and about(z1.iteration_time_s, 8.2, 0.01)
    assert about(r.iteration_time_s, 7.1, 0.01)
    z0 = sim(LL, ov={"parallelism.zero": 0})
    assert about(z0.memory.total / 1e9, 128, 0.02) and "memory" in z0.warning_kinds


def test_llama_full_recompute_fits_at_a_price():
    """Try `training.recompute: full` to see the price of recomputation: about 14 GB per GPU, but the
    iteration grows from 7.1 to 9.5 s."""
    r = sim(LL, ov={"training.recompute": "full"})
    assert about(r.memory.total / 1e9, 14, 0.06) and "memory" not in r.warning_kinds
    assert about(r.iteration_time_s, 9.5, 0.04)


def test_llama_tp_overlap_hides_three_quarters():
    """(`communication.tp_overlap: true`): ... hide about three quarters ... (exposed TP 0.74 -> 0.19 s,
    iteration 7.1 -> 6.9 s)."""
    r, o = sim(LL), sim(LL, ov={"communication.tp_overlap": True})
    assert abs(1 - o.breakdown_s["tp"] / r.breakdown_s["tp"] - 0.75) <= 0.07
    assert about(r.breakdown_s["tp"], 0.74, 0.05) and about(o.breakdown_s["tp"], 0.19, 0.1)
    assert about(o.iteration_time_s, 6.9, 0.04)


def test_llama_mfu_about_37():
    """the simulation gives about 37% (360 TFLOP/s)."""
    r = sim(LL)
    assert abs(r.mfu - 0.37) <= 0.01 and about(r.tflops_per_gpu, 360, 0.03)


# --------------------------------------------------------------------------- long-context-cp

LC = "long-context-cp"


def test_long_context_cp_hidden_on_nvlink_despite_60GB():
    """No `cp` time in the breakdown, although each GPU sends about 60 GB of K,V blocks per
    iteration (the full recomputation runs each layer's forward ring again: 4 rounds of K,V a layer,
    not 3)"""
    r = sim(LC)
    assert r.breakdown_s["cp"] == 0 and r.links["cp"]["tier"] == "scale-up"
    assert about(r.comm_bytes_per_gpu["cp"] / 1e9, 60, 0.05)


def test_long_context_order_moves_ring_to_nics_still_hidden_at_400G():
    """`parallelism.order: tp-dp-cp-pp` puts the CP ring across the nodes' NICs ...; at 400 Gb/s it is
    still hidden."""
    r = sim(LC, ov={"parallelism.order": "tp-dp-cp-pp"})
    assert r.links["cp"]["tier"] == "scale-out" and r.breakdown_s["cp"] == 0


def test_long_context_slow_nics_expose_the_ring_only_across_nodes():
    """Add `cluster.scale_out.nic_Gbps: 50` and about 6.1 s of exposed ring time appears (iteration
    7.0 -> 13.5 s); 50 Gb/s NICs alone, with the ring on NVLink, leave `cp` at zero."""
    both = sim(LC, ov={"parallelism.order": "tp-dp-cp-pp", "cluster.scale_out.nic_Gbps": 50})
    assert about(both.breakdown_s["cp"], 6.1, 0.06) and about(both.iteration_time_s, 13.5, 0.04)
    assert about(sim(LC).iteration_time_s, 7.0, 0.03)
    assert sim(LC, ov={"cluster.scale_out.nic_Gbps": 50}).breakdown_s["cp"] == 0


def test_long_context_shorter_sequences_expose_the_ring():
    """with the ring across the NICs, `model.seq_len: 16384` exposes about 0.09 s of `cp` (nearly a
    fifth of its 0.50 s iteration) even at 400 Gb/s."""
    r = sim(LC, ov={"parallelism.order": "tp-dp-cp-pp", "model.seq_len": 16384})
    assert about(r.breakdown_s["cp"], 0.09, 0.1) and about(r.iteration_time_s, 0.50, 0.04)
    assert 0.16 < r.breakdown_s["cp"] / r.iteration_time_s < 0.20


def test_long_context_selective_recompute_warns_about_116GB():
    """try `training.recompute: selective` (about 132 GB: the memory warning appears)"""
    r = sim(LC, ov={"training.recompute": "selective"})
    assert about(r.memory.total / 1e9, 132, 0.03) and "memory" in r.warning_kinds
    assert "memory" not in sim(LC).warning_kinds


def test_long_context_cp4_raises_memory_to_65GB():
    """`parallelism.cp: 4` with `training.global_batch: 16` ...: 1/4 of each sequence per GPU raises
    memory from 66 to about 81 GB. Of the 66 GB, 32 GB are the fp32 gradients of the 8B weights."""
    r = sim(LC, ov={"parallelism.cp": 4, "training.global_batch": 16})
    assert about(sim(LC).memory.total / 1e9, 66, 0.03) and about(r.memory.total / 1e9, 81, 0.03)
    assert about(sim(LC).memory.grads / 1e9, 32, 0.01)
    assert r.memory.activations == pytest.approx(2 * sim(LC).memory.activations, rel=0.02)


# --------------------------------------------------------------------------- fsdp-llama3-8b

FS = "fsdp-llama3-8b"


def _states(r) -> float:
    return (r.memory.params + r.memory.grads + r.memory.optimizer) / 1e9


def test_fsdp_model_states_about_5GB_against_34_for_zero1():
    """weights + gradients + Adam state fall from 16 bytes per parameter to 16/64 (2 GB), plus the
    working set ...: about 5.4 GB in the Memory view, against about 50 GB with `parallelism.zero: 1` (whose
    gradients Megatron keeps whole and in fp32: 32 GB)."""
    z3, z1 = sim(FS), sim(FS, ov={"parallelism.zero": 1})
    assert 2.0 < _states(z3) and about(_states(z3), 5.4, 0.1)
    assert about(_states(z1), 50, 0.05) and about(z1.memory.grads / 1e9, 32, 0.01)


def test_fsdp_each_prefetched_layer_adds_about_1GB():
    """Each layer prefetched adds about 1 GB."""
    m = [sim(FS, ov={"communication.prefetch_layers": k}).memory.total / 1e9 for k in (0, 1, 2)]
    assert m[0] < m[1] < m[2]
    assert about(m[1] - m[0], 1.05, 0.2) and about(m[2] - m[1], 1.05, 0.2)


def test_fsdp_prefetch_hides_gathers_and_zero_prefetch_exposes_them():
    """only what does not fit behind it is exposed (about 0.05 s). Set `communication.prefetch_layers: 0`
    ...: exposed DP about 0.80 s, iteration 3.1 -> 3.8 s."""
    r, z = sim(FS), sim(FS, ov={"communication.prefetch_layers": 0})
    assert about(r.breakdown_s["dp"], 0.05, 0.2) and about(z.breakdown_s["dp"], 0.80, 0.06)
    assert about(r.iteration_time_s, 3.1, 0.03) and about(z.iteration_time_s, 3.8, 0.03)


def test_fsdp_traffic_8_bytes_per_microbatch_against_6_per_iteration():
    """gradients are reduced in fp32 ..., so ZeRO-3 moves 8 bytes per parameter per micro-batch (two
    bf16 gathers of 2 bytes, one fp32 reduce-scatter of 4) against 6 per iteration for ZeRO-1 (one fp32
    reduce-scatter, one bf16 all-gather): with 4 micro-batches per GPU that is about 253 GB per GPU
    against 47 GB"""
    z3, z1 = sim(FS), sim(FS, ov={"parallelism.zero": 1})
    dp = z3.scenario.parallelism.dp
    assert about(z3.comm_bytes_per_gpu["dp"] / z1.comm_bytes_per_gpu["dp"], 4 * 8 / 6, 0.01)
    assert (about(z3.comm_bytes_per_gpu["dp"] / 1e9, 253, 0.02)
            and about(z1.comm_bytes_per_gpu["dp"] / 1e9, 47, 0.02))
    # 47 GB = 6 bytes x (63/64) x the 8.0B parameters
    assert about(z1.comm_bytes_per_gpu["dp"] / 6 / (1 - 1 / dp) / 1e9, 8.03, 0.01)


def test_fsdp_larger_micro_batches_cut_traffic_but_do_not_fit():
    """(`training.micro_batch: 4`: about 63 GB, but the activations no longer fit and the memory
    warning appears)."""
    r = sim(FS, ov={"training.micro_batch": 4})
    assert about(r.comm_bytes_per_gpu["dp"] / 1e9, 63, 0.02)
    assert r.comm_bytes_per_gpu["dp"] == pytest.approx(sim(FS).comm_bytes_per_gpu["dp"] / 4, rel=0.01)
    assert "memory" in r.warning_kinds and "memory" not in sim(FS).warning_kinds


# --------------------------------------------------------------------------- deepseek-v3

DS = "deepseek-v3"


def test_deepseek_nvlink_four_times_the_nic():
    """H800 NVLink gives each GPU 200 GB/s per direction ... and each GPU has a 400 Gb/s (50 GB/s)
    InfiniBand NIC — four times less"""
    c = sim(DS).scenario.cluster
    assert c.scale_up.bandwidth_GBps == 200 and c.scale_out.nic_Gbps == 400
    assert c.scale_out.nics_per_node == c.gpus_per_node
    assert c.scale_up.bandwidth_GBps / (c.scale_out.nic_Gbps / 8) == 4


def test_deepseek_ep_limited_by_nics_and_is_the_bottleneck():
    """limited by the node NICs. Exposed EP is the bottleneck: 1.5 s, about a tenth of the 16.0 s
    iteration."""
    r = sim(DS)
    assert r.links["ep"]["tier"] == "scale-out" and r.links["ep"]["group"] == 64
    assert r.bottleneck.startswith("EP takes")
    assert about(r.breakdown_s["ep"], 1.5, 0.05)
    assert abs(r.breakdown_s["ep"] / r.iteration_time_s - 0.1) <= 0.015
    assert about(r.iteration_time_s, 16.0, 0.01)


def test_deepseek_unlimited_routing_multiplies_ep_about_5x():
    """set `model.moe.max_nodes: 0` (plain all-to-all) and watch the exposed EP time grow about 5x
    (1.5 -> 7.2 s; iteration 16.0 -> 22.1 s)."""
    r, u = sim(DS), sim(DS, ov={"model.moe.max_nodes": 0})
    assert 4.5 <= u.breakdown_s["ep"] / r.breakdown_s["ep"] <= 5.5
    assert about(u.breakdown_s["ep"], 7.2, 0.04) and about(u.iteration_time_s, 22.1, 0.01)


def test_deepseek_imbalance_slows_the_iteration():
    """`model.moe.imbalance: 1.5` slows the iteration from 16.0 to about 18.7 s on the same layer
    split, and the busiest rank also keeps the activations of 1.5x the routed token copies (routing
    here drops no token): that split needs 96.7 GB, so the layer split moves layers off the ranks
    holding many micro-batches and fits at 83.2 GB, 21.3 s per iteration."""
    base = sim(DS)
    same = sim(DS, ov={"model.moe.imbalance": 1.5, "parallelism.stage_layers": tuple(base.stage_layers)})
    assert about(same.iteration_time_s, 18.7, 0.03)
    assert same.memory_over_capacity and f"{same.memory.total / 1e9:.1f}" == "96.7"
    moved = sim(DS, ov={"model.moe.imbalance": 1.5})
    assert moved.stage_layers != base.stage_layers and not moved.memory_over_capacity
    assert f"{moved.memory.total / 1e9:.1f}" == "83.2" and about(moved.iteration_time_s, 21.3, 0.01)


def test_deepseek_dualpipe_fused_bars():
    """each rank fuses the forward of one with the backward of another (purple `F&B` bars)"""
    assert any(t.kind == "F&B" for t in sim(DS).tasks)


def test_deepseek_1f1b_multiplies_exposed_ep_more_than_fivefold():
    """Switch `parallelism.schedule: 1f1b` and the exposed EP time grows more than fivefold (1.5 -> 8.1 s;
    iteration 23.1 s)."""
    r, o = sim(DS), sim(DS, ov={"parallelism.schedule": "1f1b"})
    assert 5.0 < o.breakdown_s["ep"] / r.breakdown_s["ep"] <= 6.0
    assert about(o.breakdown_s["ep"], 8.1, 0.03) and about(o.iteration_time_s, 23.1, 0.03)


def test_deepseek_dualpipe_two_weight_copies_and_pp_plus_1_activations():
    """DualPipe keeps two copies of the weights and, on every rank, the activations of PP+1
    micro-batches (1F1B: PP - s on stage s), so rank 4 needs 84.2 GB against 53.8 GB on 1F1B's
    stage 4; at most 84.2 GB against 86.8 GB on 1F1B's time-balanced split, which gives stage 0,
    holding 16 micro-batches, two MoE layers beside the three dense ones — over the H800's 85.9 GB,
    so the split moves one layer to the last stage (4 on stages 0-14, 1 beside the output layer and
    MTP) and 1F1B fits at 71.3 GB, 0.1 % slower"""
    d, o = sim(DS), sim(DS, ov={"parallelism.schedule": "1f1b"})
    p = d.scenario.parallelism.pp
    mid = len(d.memory_by_class) // 4
    assert d.memory_by_class[mid].params / o.memory_by_class[mid].params == pytest.approx(2, rel=0.02)
    # Rank s holds chunks s and p-1-s: the same 4 layers per chunk as 1F1B's stage s for 1 <= s < p/2.
    for s in range(1, p // 2):
        ratio_ = d.memory_by_class[s].activations / o.memory_by_class[s].activations
        assert ratio_ == pytest.approx((p + 1) / (p - s), rel=0.02), s
    assert about(d.memory_by_class[4].total / 1e9, 84.2, 0.005)
    assert about(o.memory_by_class[4].total / 1e9, 53.8, 0.005)
    balanced = sim(DS, ov={"parallelism.schedule": "1f1b", "parallelism.pipeline_layout": (5, *[4] * 14, 0)})
    assert about(d.memory.total / 1e9, 84.2, 0.005) and about(balanced.memory.total / 1e9, 86.8, 0.005)
    assert "memory" in balanced.warning_kinds and "memory" not in d.warning_kinds
    assert balanced.memory_by_class[0].total == balanced.memory.total
    assert o.stage_layers == (4,) * 15 + (1,) and "memory" not in o.warning_kinds
    assert about(o.memory.total / 1e9, 71.3, 0.005)
    assert about(o.iteration_time_s / balanced.iteration_time_s, 1.001, 0.001)


def test_deepseek_memory_recipe_makes_dualpipe_fit():
    """The report's memory recipe makes that fit in the H800's 80 GiB (85.9 GB; the blockwise FP8
    recipe's cached weight copies and the fp32 gradients included, with AdamW's moments in bf16)
    ... Without it (`training.recompute_modules: [core_attn]`
    with `training.fp8_storage: te`) the uniform split needs about 135 GB and the memory warning
    appears, and no layer split fits either (the split keeps the uniform one); with only
    `training.fp8_storage: te` the uniform split needs 100.2 GB and the layer split fits the GPU by
    piling the layers onto the chunks whose ranks hold few of their micro-batches: 85.8 GB at
    18.0 s instead of 16.0 s."""
    d = sim(DS)
    t = d.scenario.training
    assert t.recompute == "selective" and t.fp8_storage == "deepseek"
    assert set(t.recompute_modules) == {"layernorm", "mla_up_proj", "moe_act"}
    assert t.optimizer == "adam-bf16"
    assert d.memory.total < d.scenario.hardware.gpu.capacity_bytes - 1e9 and "memory" not in d.warning_kinds
    bare_ov = {"training.recompute_modules": ("core_attn",), "training.fp8_storage": "te"}
    uniform = {"parallelism.stage_layers": (4,) * 15 + (1,)}
    bare, bare_uniform = sim(DS, ov=bare_ov), sim(DS, ov={**bare_ov, **uniform})
    assert about(bare_uniform.memory.total / 1e9, 135, 0.01) and "memory" in bare_uniform.warning_kinds
    assert "memory" in bare.warning_kinds and bare.stage_layers == bare_uniform.stage_layers
    assert about(d.iteration_time_s, 16.0, 0.01)
    te = sim(DS, ov={"training.fp8_storage": "te"})
    te_uniform = sim(DS, ov={"training.fp8_storage": "te", **uniform})
    assert about(te_uniform.memory.total / 1e9, 100.2, 0.01) and "memory" in te_uniform.warning_kinds
    assert about(te.memory.total / 1e9, 85.8, 0.005) and "memory" not in te.warning_kinds
    assert about(te.iteration_time_s, 18.0, 0.01)


def test_deepseek_full_recompute_fits():
    """`training.recompute: full` brings it to about 50 GB at 20.8 s per iteration (the recomputed MoE
    layers dispatch and combine their tokens again: EP 1.5 -> 2.2 s)."""
    r = sim(DS, ov={"training.recompute": "full"})
    assert about(r.memory.total / 1e9, 50, 0.02) and "memory" not in r.warning_kinds
    assert about(r.iteration_time_s, 20.8, 0.02) and r.iteration_time_s > sim(DS).iteration_time_s
    assert about(sim(DS).breakdown_s["ep"], 1.5, 0.05) and about(r.breakdown_s["ep"], 2.2, 0.03)


def test_deepseek_mtp_on_the_edge_ranks():
    """The MTP module sits on the edge ranks: `model.mtp_depth: 0` shortens the iteration to 15.6 s;
    the split keeps five layers on each edge rank (chunks of 4 and 1 instead of 3 and 2) and their
    memory rises from 80.4 to 83.7 GB."""
    d, n = sim(DS), sim(DS, ov={"model.mtp_depth": 0})
    assert d.scenario.model.mtp_depth == 1 and d.scenario.model.mla is not None
    per = [m.total / 1e9 for m in d.memory_by_class]
    assert per[0] == per[-1] == min(per) and about(per[0], 80.4, 0.005)
    assert (d.stage_layers[0], d.stage_layers[-1]) == (3, 2)
    assert (n.stage_layers[0], n.stage_layers[-1]) == (4, 1)
    assert about(n.memory_by_class[0].total / 1e9, 83.7, 0.005)
    assert about(n.iteration_time_s, 15.6, 0.01) and n.iteration_time_s < d.iteration_time_s


def test_deepseek_comm_sms_slow_the_overlapped_compute():
    """(`communication.comm_sms: 20`, ...): 20 of the H800's 132 SMs run the communication kernels, so
    the computation an all-to-all hides behind runs at 112/132 of its speed meanwhile;
    `communication.comm_sms: 0` (communication for free) shortens the iteration from 16.0 to 15.6 s."""
    d, z = sim(DS), sim(DS, ov={"communication.comm_sms": 0})
    assert d.scenario.communication.comm_sms == 20 and d.scenario.hardware.gpu.sms == 132
    assert about(z.iteration_time_s, 15.6, 0.01) and z.iteration_time_s < d.iteration_time_s
    # 1F1B hides no all-to-all behind computation: there the SMs cost only what the gradient
    # buckets reduced under each stage's last backward take (techniques/dp_contention.py), under 1 %.
    o, oz = sim(DS, ov={"parallelism.schedule": "1f1b"}), sim(DS, ov={"parallelism.schedule": "1f1b",
                                                                      "communication.comm_sms": 0})
    assert 0 < o.iteration_time_s - oz.iteration_time_s < 0.01 * oz.iteration_time_s


# --------------------------------------------------------------------------- zero-bubble-8gpu

ZB = "zero-bubble-8gpu"


def test_zero_bubble_formula_drops_from_30_to_14_at_same_stage0_activations():
    """the bubble drops from (p-1)(F+B+W) to (p-1)(F+B-W): the formula from 30.4% to 13.6% of the
    iteration, at the same activation memory on stage 0 (p micro-batches in flight, about 5.7 GB).
    W is long here (2.8 ms, against F = 2.6 ms and B = 3.0 ms): each weight-gradient GEMM also pays
    the fp32 gradient-accumulation epilogue"""
    z, o = sim(ZB), sim(ZB, ov={"parallelism.schedule": "1f1b"})
    assert o.bubble_formula == pytest.approx(7 / 23)
    assert abs(z.bubble_formula - 0.136) <= 0.001
    nums = dict(re.findall(r"([FBW]) = ([\d.]+) ms", z.bubble_formula_text))
    F, B, W = (float(nums[k]) for k in "FBW")
    assert about(W, 2.8, 0.02) and about(B, 3.0, 0.02) and about(F, 2.6, 0.02) and F < W < B
    assert z.memory_by_class[0].activations == pytest.approx(o.memory_by_class[0].activations, rel=0.01)
    assert about(z.memory_by_class[0].activations / 1e9, 5.7, 0.05)


def test_zero_bubble_card_above_formula_from_the_split_and_ideal_equals_the_general_form():
    """A deferred W fills gaps of at most F, so with W longer than F the bubble is (p-1)B: the
    formula shown is the paper's in general form, (p-1)(F+B-min(F,W)). The Bubble card (averaged
    over stages) reads about 23%, above the formula, because the layers split [4, 4, 5, 4, 4, 4, 5,
    2]: `parallelism.ideal_pipeline: true` (equal stages, free communication) brings it down to the
    formula's 13.6% exactly."""
    z = sim(ZB)
    assert tuple(z.stage_layers) == (4, 4, 5, 4, 4, 4, 5, 2)
    assert abs(z.bubble_fraction - 0.23) <= 0.01 and z.bubble_fraction > z.bubble_formula
    i = sim(ZB, ov={"parallelism.ideal_pipeline": True})
    sc = i.scenario
    p, m = sc.parallelism.pp, sc.training.global_batch // (sc.parallelism.dp * sc.training.micro_batch)
    F, B, W = stage_passes(iteration_builder(sc))
    assert W > F
    assert i.bubble_fraction == pytest.approx((p - 1) * B / (m * (F + B + W) + (p - 1) * B), abs=1e-6)
    assert abs(i.bubble_fraction - 0.136) <= 0.001
    assert i.bubble_fraction == pytest.approx(i.bubble_formula, abs=1e-9)


def test_zero_bubble_1f1b_same_compute_larger_bubble():
    """Switch `parallelism.schedule: 1f1b` (the baseline) and back: same compute, larger bubble (card
    about 37%, iteration 0.19 -> 0.23 s)."""
    z, o = sim(ZB), sim(ZB, ov={"parallelism.schedule": "1f1b"})
    assert o.breakdown_s["compute"] == pytest.approx(z.breakdown_s["compute"], rel=1e-6)
    assert o.bubble_fraction > z.bubble_fraction and abs(o.bubble_fraction - 0.37) <= 0.01
    assert about(z.iteration_time_s, 0.19, 0.03) and about(o.iteration_time_s, 0.23, 0.03)


def test_zero_bubble_zbh2_doubles_warmup_memory():
    """`parallelism.schedule: zb-h2` warms up with twice the forwards (2p-1 micro-batches in flight:
    stage 0's activations grow 15/8, see the Memory view)"""
    z, h2 = sim(ZB), sim(ZB, ov={"parallelism.schedule": "zb-h2"})
    assert (h2.memory_by_class[0].activations / z.memory_by_class[0].activations
            == pytest.approx(15 / 8, rel=0.02))


def test_zero_bubble_zbh2_not_zero_here_because_w_exceeds_f():
    """zero when F+B <= 2W and W <= F; here W (2.8 ms) is longer than F (2.6 ms), so each W fills
    only an F-long gap and the bubble is (p-1)(F+B-2F) = (p-1)(B-F): the formula gives 2.2%, not
    zero, and the ideal pipeline idles exactly that. ... the metrics the steady state (about
    0.17 s)."""
    h2 = sim(ZB, ov={"parallelism.schedule": "zb-h2"})
    nums = dict(re.findall(r"([FBW]) = ([\d.]+) ms", h2.bubble_formula_text))
    F, B, W = (float(nums[k]) for k in "FBW")
    assert about(W, 2.8, 0.02) and about(F, 2.6, 0.02) and W > F
    assert abs(h2.bubble_formula - 0.022) <= 0.001
    assert about(h2.iteration_time_s, 0.17, 0.05) and h2.iteration_time_s < sim(ZB).iteration_time_s
    ideal = sim(ZB, ov={"parallelism.schedule": "zb-h2", "parallelism.ideal_pipeline": True})
    assert ideal.bubble_fraction == pytest.approx(ideal.bubble_formula, abs=1e-9)


def test_zero_bubble_pipedream_busiest_stage_never_idles():
    """`parallelism.schedule: pipedream-async` ... the busiest stage never idles in steady state (the
    card's remaining 15% is the lighter stages waiting for the two 5-layer ones; 0 under
    `parallelism.ideal_pipeline: true`)"""
    pd = sim(ZB, ov={"parallelism.schedule": "pipedream-async"})
    assert pd.bubble_fraction_busiest < 1e-9 and pd.breakdown_s["bubble"] < 1e-9
    assert abs(pd.bubble_fraction - 0.15) <= 0.02
    ideal = sim(ZB, ov={"parallelism.schedule": "pipedream-async", "parallelism.ideal_pipeline": True})
    assert ideal.bubble_fraction < 1e-9


def test_zero_bubble_pipedream_stashes_8_weight_copies_on_stage_0():
    """one stashed copy of the weights per micro-batch in flight (8 copies on stage 0 — the Memory view)"""
    pd, z = sim(ZB, ov={"parallelism.schedule": "pipedream-async"}), sim(ZB)
    assert pd.memory_by_class[0].params / z.memory_by_class[0].params == pytest.approx(8, rel=0.02)
    assert pd.memory_by_class[-1].params == pytest.approx(z.memory_by_class[-1].params, rel=0.02)
