"""Settings given where nothing reads them are named, not refused (explorer/config/dormant.py):
each rule is checked to change nothing while its condition holds, and to be read (not named) where
it does not hold; ``run`` and ``validate`` print a note per setting and ``run --json`` lists them.
Found by hunts: an FP8 recipe in a bf16 run, sequence parallelism at tp 1 and a gossip degree
without gossip were accepted and silently ignored."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.config.dormant import RULES, dormant_settings
from explorer.run.total import run_total
from explorer.scenario import apply_overrides, from_dict, load_raw
from explorer.simulate import simulate

from cli_support import cli
from conftest import ROOT

TEACH = ROOT / "scenarios" / "teaching-8gpu.yaml"      # bf16, tp 1, dp 2, pp 4, ZeRO-1, allreduce
ONE_DP = {"parallelism.dp": 1, "parallelism.pp": 8}
TWO_DP = {"parallelism.dp": 2, "parallelism.pp": 4}

RUN = {"training.total_tokens": 1e10}                       # a single-phase run plan
FAILING = {**RUN, "reliability.mtbf_gpu_hours": 50}          # ... whose GPUs fail (a 6.25 h job MTBF)
# ... and are repaired in a day, on two nodes of data-parallel replicas that survive a node's loss
ELASTIC = {"reliability.repair_h": 24, "cluster.nodes": 2, "parallelism.pp": 1, "parallelism.dp": 16}
# field -> (the condition's overrides on teaching-8gpu, the dormant value, overrides where it is read)
CASES = {
    # (a hunt: an fp8 run on an A100, priced in bf16, said nothing and quoted an "FP8 peak")
    "training.dtype": ({"hardware.gpu": "a100-80gb"}, "fp8", {"hardware.gpu": "h100-sxm"}),
    "training.fp8_recipe": ({}, "blockwise", {"training.dtype": "fp8"}),
    "training.fp8_storage": ({}, "deepseek", {"training.dtype": "fp8"}),
    "training.lora_targets": ({}, "qkv", {"training.lora_rank": 16}),
    "parallelism.sequence_parallel": ({}, True, {"parallelism.tp": 2, "parallelism.dp": 1}),
    "communication.tp_overlap": ({}, True, {"parallelism.tp": 2, "parallelism.dp": 1}),
    "communication.dp_overlap": (ONE_DP, False, TWO_DP),
    # (FSDP keeps no gradient buffer in the reduce dtype: on one rank nothing reads it)
    "communication.grad_reduce_dtype": ({**ONE_DP, "training.framework": "fsdp"}, "bf16",
                                        {**TWO_DP, "training.framework": "fsdp"}),
    "parallelism.gossip_peers": ({}, 1, {"parallelism.dp_kind": "gossip-exponential",
                                         "cluster.nodes": 2, "parallelism.dp": 4}),
    "parallelism.ps_servers": ({}, 2, {"parallelism.dp_kind": "parameter-server"}),
    "training.recompute_modules": ({"training.recompute": "full"}, ["mlp"],
                                   {"training.recompute": "selective"}),
    "communication.prefetch_layers": ({}, 3, {"parallelism.zero": 3}),
    "training.attention_kernel": ({"training.dtype": "fp32"}, "flash3", {"training.dtype": "bf16"}),
    # A run plan's settings (a hunt found them unread and unnamed without a plan, or without failures).
    "training.critical_batch_tokens": ({}, 1e6, RUN),
    "reliability.mtbf_gpu_hours": ({}, 5000, RUN),
    "reliability.pue": ({}, 1.5, RUN),
    "reliability.price_per_gpu_hour": ({}, 2.0, RUN),
    "reliability.checkpoint_write_GBps": (RUN, 0.1, FAILING),
    "reliability.checkpoint_read_GBps": (RUN, 0.1, FAILING),
    "reliability.restart_s": (RUN, 600, FAILING),
    "reliability.async_checkpoint": (RUN, True, FAILING),
    "reliability.checkpoint_interval_s": (RUN, 60, FAILING),
    "reliability.repair_h": (RUN, 24, FAILING),
    "reliability.elastic": (FAILING, True, ELASTIC),
}
GNN = ROOT / "scenarios" / "gnn-sage-papers100m.yaml"      # mini-batch, every feature local
DLRM = ROOT / "scenarios" / "dlrm-dcnv2.yaml"              # DCNv2 interaction
FULL_GRAPH = {"model.gnn.mode": "fullgraph", "training.global_batch": 16, "training.micro_batch": 1}
SAMPLED = {"model.gnn.mode": "minibatch", "training.global_batch": 16384, "training.micro_batch": 1024,
           "model.gnn.local_share": 0.0625}
SERVE = ROOT / "scenarios" / "serve-llama3-70b-tp8.yaml"   # co-located, TP 8 on one node
DISAGGREGATED = {"inference.disaggregated.prefill.tp": 4, "inference.disaggregated.prefill.replicas": 1,
                 "inference.disaggregated.decode.tp": 4, "inference.disaggregated.decode.replicas": 1}
# The workload families' rules, on their own scenario files: field -> (file, condition, value, read).
FAMILY_CASES = {
    "model.gnn.cache_hit": (GNN, {}, 0.9, {"model.gnn.local_share": 0.0625}),
    # (a hunt: overlap on SALIENT's scenario, every feature local, changed nothing unsaid)
    "model.gnn.overlap": (GNN, {}, True, {"model.gnn.local_share": 0.0625}),
    "model.gnn.local_share": (GNN, FULL_GRAPH, 0.5, SAMPLED),
    "model.gnn.fanouts": (GNN, FULL_GRAPH, [10, 10, 10], SAMPLED),
    "model.gnn.cpu_workers": (GNN, FULL_GRAPH, 2, {**SAMPLED, "model.gnn.pipelined": False}),
    "model.gnn.sampler_edges_per_core_s": (GNN, FULL_GRAPH, 1e6, {**SAMPLED, "model.gnn.pipelined": False}),
    "model.gnn.pipelined": (GNN, FULL_GRAPH, False, SAMPLED),
    "model.dlrm.cross_layers": (DLRM, {"model.dlrm.interaction": "dot"}, 5,
                                {"model.dlrm.interaction": "dcn"}),
    "model.dlrm.cross_rank": (DLRM, {"model.dlrm.interaction": "dot"}, 64,
                              {"model.dlrm.interaction": "dcn"}),
}
# Disaggregated serving (no override turns it off): field -> (the pools' condition, the dormant value,
# the co-located scenario's overrides where it is read).
SERVING_CASES = {
    "parallelism.tp": (DISAGGREGATED, 4, {}),
    "parallelism.pp": ({**DISAGGREGATED, "parallelism.tp": 4}, 2, {"parallelism.tp": 4}),
    "inference.chunked_prefill_tokens": (DISAGGREGATED, 256, {}),
}


def _raw(over: dict, drop: str = "", path=TEACH) -> dict:
    """teaching-8gpu (or ``path``) with ``over``, without ``drop`` (a dotted field its file gives)."""
    raw = apply_overrides(load_raw(path), over)
    if drop:
        *path, last = drop.split(".")
        node = raw
        for part in path:
            node = node.get(part, {})
        node.pop(last, None)
    return raw


def _figures(raw: dict) -> tuple:
    """The run's figures, and its run plan's where it has one (days, GPU-hours, energy, price)."""
    sc = from_dict(raw)
    r = simulate(sc)
    plan = run_total(sc, simulate, base=r)
    run = None if plan is None else (plan.days, plan.gpu_hours, plan.energy_MWh, plan.price,
                                     None if plan.loss is None else plan.loss.equivalent_tokens)
    return (r.iteration_time_s, r.memory.total, sorted(r.breakdown_s.items()),
            sorted(r.comm_bytes_per_gpu.items()), run)


def test_every_rule_has_a_case():
    assert sorted([*CASES, *FAMILY_CASES, *SERVING_CASES]) == sorted(r.field for r in RULES)


@pytest.mark.parametrize("field", sorted(SERVING_CASES))
def test_a_disaggregated_servers_unread_setting_changes_nothing_and_is_named(field):
    """Top-level degrees and chunked prefill on pools that set their own and never mix prefill into
    decode (a hunt found them unread and unnamed; chunking even moved the decode pool's max batch)."""
    condition, value, read = SERVING_CASES[field]
    without, given = _raw(condition, drop=field, path=SERVE), _raw({**condition, field: value}, path=SERVE)
    assert _figures(given) == _figures(without)
    assert field in dict(dormant_settings(from_dict(given)))
    # Co-located, the same setting is read: not named, and it moves the result.
    without, given = _raw(read, drop=field, path=SERVE), _raw({**read, field: value}, path=SERVE)
    assert field not in dict(dormant_settings(from_dict(given)))
    assert _figures(given) != _figures(without)


def _case(field: str) -> tuple:
    """(file, condition, dormant value, where it is read) of ``field``'s rule."""
    return FAMILY_CASES[field] if field in FAMILY_CASES else (TEACH, *CASES[field])


@pytest.mark.parametrize("field", sorted([*CASES, *FAMILY_CASES]))
def test_a_dormant_setting_changes_nothing_and_is_named(field):
    path, base, value, _ = _case(field)
    without, given = _raw(base, drop=field, path=path), _raw({**base, field: value}, path=path)
    assert _figures(given) == _figures(without)
    named = dict(dormant_settings(from_dict(given)))
    assert field in named and "\n" not in named[field]
    assert field not in dict(dormant_settings(from_dict(without)))


@pytest.mark.parametrize("field", sorted([*CASES, *FAMILY_CASES]))
def test_where_the_setting_is_read_it_is_not_named_and_moves_the_result(field):
    path, base, value, read = _case(field)
    without, given = _raw({**base, **read}, path=path), _raw({**base, **read, field: value}, path=path)
    assert field not in dict(dormant_settings(from_dict(given)))
    assert _figures(given) != _figures(without)


def test_run_and_validate_name_them(capsys):
    sets = ["--set", "training.fp8_recipe=blockwise", "--set", "parallelism.sequence_parallel=true"]
    assert main(["run", "teaching-8gpu", *sets]) == 0
    out = capsys.readouterr().out
    assert "note: training.fp8_recipe is not read: training.dtype is bf16" in out
    assert "note: parallelism.sequence_parallel is not read: parallelism.tp is 1" in out
    assert main(["run", "teaching-8gpu", *sets, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["dormant"]
    assert [d["field"] for d in got] == ["training.fp8_recipe", "parallelism.sequence_parallel"]
    assert main(["validate", "teaching-8gpu", *sets]) == 0
    assert capsys.readouterr().out.count("note: ") == 2
    assert main(["run", "teaching-8gpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dormant"] == []


def test_a_default_written_back_is_not_named():
    raw = _raw({"training.fp8_storage": "te", "parallelism.sequence_parallel": False})
    assert dormant_settings(from_dict(raw)) == []


def test_no_shipped_scenario_gives_a_setting_it_does_not_read():
    from explorer.scenario import load, shipped_scenarios
    assert {n: dormant_settings(load(p)) for n, p in shipped_scenarios().items()
            if dormant_settings(load(p))} == {}


def test_the_app_says_what_it_does_not_read():
    """The Timeline view lists a dormant setting below the warnings, as an info; a shipped preset
    shows none."""
    from app_support import run_app
    at = run_app(scenario="teaching-8gpu", **{"training.fp8_recipe": "blockwise"})
    infos = [str(i.value) for i in at.info]
    assert "Not read: training.fp8_recipe — training.dtype is bf16; only fp8 runs read it." in infos
    assert not [i for i in run_app(scenario="teaching-8gpu").info if "Not read" in str(i.value)]


def test_context_parallel_ranks_reduce_gradients_so_dp_overlap_is_read():
    """A regression hunt: at dp 1 with cp 2 the gradients are still reduced over the cp ranks, and
    dp_overlap moved the run (120.9 -> 160.8 ms at ZeRO-3) while a note called it not read."""
    raw = _raw({"parallelism.dp": 1, "parallelism.cp": 2, "parallelism.zero": 3,
                "communication.dp_overlap": False})
    assert "communication.dp_overlap" not in dict(dormant_settings(from_dict(raw)))
    on = _raw({"parallelism.dp": 1, "parallelism.cp": 2, "parallelism.zero": 3})
    assert _figures(raw) != _figures(on)


@pytest.mark.parametrize("zero,kind,dormant", [(0, "1bit", True), (1, "1bit", False), (0, "fp16", False)])
def test_one_bit_adam_without_zero_does_not_read_dp_overlap(zero, kind, dormant):
    """A hunt: dp_overlap false on cloud-25g-dp (1-bit Adam) changed nothing, bit for bit, and
    ``dormant`` stayed empty.  1-bit Adam reduces in its optimizer step, after the backward, so without
    ZeRO nothing reads it; with ZeRO-1 the parameter gather's overlap does, and fp16 compression
    buckets leave during the backward."""
    cloud = ROOT / "scenarios" / "cloud-25g-dp.yaml"
    over = {"parallelism.zero": zero, "communication.compression.kind": kind}
    off = _raw({**over, "communication.dp_overlap": False}, path=cloud)
    named = dict(dormant_settings(from_dict(off)))
    assert ("communication.dp_overlap" in named) is dormant
    assert (_figures(off) == _figures(_raw(over, path=cloud))) is dormant


def test_sweep_says_when_a_varied_field_is_read_by_no_row(capsys):
    """A sweep over SP and the FP8 recipe on a bf16, tp 1 run printed equal rows without a word, and
    its --json rows carried no ``dormant``: now a note per such field, and each valid row's
    ``dormant`` is what run --json says of that combination."""
    vary = ("--vary", "parallelism.sequence_parallel=false,true",
            "--vary", "training.fp8_recipe=tensorwise,blockwise")
    proc = cli("sweep", "teaching-8gpu", *vary)
    assert proc.returncode == 0, proc.stderr
    notes = [ln.strip() for ln in proc.stdout.splitlines() if "note:" in ln]
    assert notes == [
        "note: parallelism.sequence_parallel is not read: parallelism.tp is 1; it acts on tensor-parallel "
        "activations (on every valid row, so its values give equal figures)",
        "note: training.fp8_recipe is not read: training.dtype is bf16; only fp8 runs read it (on every "
        "valid row, so its values give equal figures)"]
    rows = json.loads(cli("sweep", "teaching-8gpu", *vary, "--json").stdout)
    assert [r["valid"] for r in rows] == [False, True, False, True]
    assert "dormant" not in rows[0]
    for r in rows[1::2]:
        sets = [a for k, v in r["overrides"].items() for a in ("--set", f"{k}={json.dumps(v)}")]
        assert main(["run", "teaching-8gpu", *sets, "--json"]) == 0
        assert r["dormant"] == json.loads(capsys.readouterr().out)["dormant"]
    both = ["training.fp8_recipe", "parallelism.sequence_parallel"]
    assert [d["field"] for d in rows[3]["dormant"]] == both
    assert [d["field"] for d in rows[1]["dormant"]] == ["training.fp8_recipe"]    # SP off: its default
    # SP beside tp 2, which reads it: no note for it.
    proc = cli("sweep", "teaching-8gpu", "--vary", "parallelism.sequence_parallel=false,true",
               "--vary", "parallelism.tp=1,2")
    assert proc.returncode == 0 and "note:" not in proc.stdout


def test_sweeps_fastest_row_names_no_value_of_a_field_no_row_reads():
    """A regression hunt: "fastest that fits: 14.0 ms at model.gnn.overlap=True" under the note that
    no row reads overlap; the answer leaves such fields out (its link still reopens the row)."""
    proc = cli("sweep", "gnn-sage-papers100m", "--vary", "model.gnn.overlap=true,false")
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("fastest that fits: 14.0 ms at any of the values (none is read)  (?")
    proc = cli("sweep", "gnn-sage-papers100m", "--vary", "model.gnn.overlap=true,false",
               "--vary", "model.gnn.cpu_workers=20,40")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("fastest that fits"))
    assert " at model.gnn.cpu_workers=40  (?" in line


@pytest.mark.parametrize("sets", [
    {"model.gnn.local_share": 0.5, "model.gnn.cache_hit": 1.0},                 # the cache serves all
    {"cluster.nodes": 1, "cluster.gpus_per_node": 1, "parallelism.dp": 1,      # one partition
     "model.gnn.local_share": None},
])
def test_overlap_with_nothing_fetched_is_named_and_changes_nothing(sets):
    """A regression hunt: overlap changed nothing, unsaid, where the cache served every remote
    feature or one partition held them all (the rule had read local_share 1 only)."""
    on = from_dict(_raw({**sets, "model.gnn.overlap": True}, path=GNN))
    off = from_dict(_raw({**sets, "model.gnn.overlap": False}, path=GNN))
    assert [f for f, _ in dormant_settings(on)] == ["model.gnn.overlap"]
    assert simulate(on).iteration_time_s == simulate(off).iteration_time_s
