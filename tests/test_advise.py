"""The placement advisor (issue 12, point 5): ``python -m explorer advise`` — its JSON contract,
placements that reproduce with ``--set``, a best never slower than the shipped hand-written
placements, the 32K-GPU case within its time budget, and one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.design import open_base
from explorer.design.advise import Placement, advise, enumerate_placements
from explorer.schedules import registry
from explorer.simulate import simulate

from cli_support import cli

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"placement", "overrides", "iteration_time_s", "mfu", "memory_GB_total", "fits", "wan_links", "link"}


def sets(overrides: dict) -> list[str]:
    """``--set`` flags for overrides (JSON is YAML, so every value reads back as itself)."""
    return [a for k, v in overrides.items() for a in ("--set", f"{k}={json.dumps(v)}")]


@pytest.fixture(scope="module")
def two_dc():
    return advise(open_base("two-datacenters"), top=3)


@pytest.fixture(scope="module")
def cross_region():
    return advise(open_base("cross-region-pp"), top=3)


@pytest.mark.slow
def test_json_contract_sorted_and_reproduced_by_set():
    proc = cli("advise", "cross-region-pp", "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    # The 3 ranked placements, then the naive and own ones where not among them (flagged).
    rows, extra = listed[:3], listed[3:]
    assert all(r["naive"] or r["own"] for r in extra) and len(extra) <= 2
    assert len(rows) == 3 and all(KEYS <= set(r) for r in listed)
    times = [r["time_per_step_s"] for r in rows]
    assert times == sorted(times) and times[0] > 0
    assert all(r["fits"] and r["link"].startswith("scenario=cross-region-pp&") for r in rows)
    assert all(r["wan_links"]["links"] == 1 and r["wan_links"]["busiest"] == "dc0-dc1" for r in rows)
    assert "best vs naive" in proc.stderr and "x faster" in proc.stderr
    for r in rows[:2]:                       # the full engine with the row's overrides, as a user runs it
        run = cli("run", "cross-region-pp", "--json", *sets(r["overrides"]))
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["iteration_time_s"] == pytest.approx(r["iteration_time_s"], rel=1e-9)


@pytest.mark.slow
def test_text_table_and_gain_over_naive():
    proc = cli("advise", "two-datacenters", "--top", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert " 1  " in out and " 2  " in out and "(the scenario's own)" in out
    assert "best vs naive (DP flat ring across all datacenters, 7.985 s):" in out
    assert "--set parallelism.span=" in out


@pytest.mark.slow
def test_two_datacenters_best_beats_every_hand_written_placement(two_dc):
    """The scenario's placement and the alternatives its description walks through (PP across, MPI,
    hierarchical) are all no faster than the advisor's best."""
    best = two_dc.top[0].iteration_time_s
    assert two_dc.naive is not None and two_dc.naive.iteration_time_s == pytest.approx(7.985, abs=1e-3)
    assert two_dc.own is not None and two_dc.own.iteration_time_s == pytest.approx(7.985, abs=1e-3)
    assert two_dc.speedup > 1.7 and best < 4.6
    base = open_base("two-datacenters")
    for ov in ({"parallelism.order": "tp-cp-ep-dp-pp"}, {"communication.library": "mpi"},
               {"communication.algorithm": "hierarchical"}):
        assert simulate(base.scenario(ov)).iteration_time_s >= best


def test_cross_region_best_beats_its_schedules_and_dp_across(cross_region):
    best = cross_region.top[0].iteration_time_s
    base = open_base("cross-region-pp")
    hand = [cross_region.own.iteration_time_s]
    hand += [simulate(base.scenario({"parallelism.schedule": s})).iteration_time_s
             for s in registry.names() if registry.get(s).timed is not None]
    hand.append(simulate(base.scenario({"parallelism.order": "tp-cp-ep-pp-dp"})).iteration_time_s)
    assert hand[0] == pytest.approx(5.298, abs=2e-3)        # the description's 1F1B over 10 ms
    assert min(hand[1:3]) == pytest.approx(5.30, abs=1e-2)  # its latency-aware schedules
    assert all(t >= best for t in hand) and best < 4.5
    assert cross_region.naive.iteration_time_s == pytest.approx(6.112, abs=2e-3)


def test_placements_follow_the_span_rules():
    sc = open_base("two-datacenters").scenario()
    rows, timed = enumerate_placements(sc)
    assert {r.span for r in rows} == {"dp", "pp"}             # dp+pp needs 3+ datacenters
    assert all(r.pp % 2 == 0 for r in rows if r.span == "pp")
    assert all(512 % (8 * r.pp) == 0 for r in rows if r.span == "dp")
    assert {t.schedule for t in timed} == {n for n in registry.names() if registry.get(n).timed is not None}
    assert all(t.pipeline_crosses for t in timed)
    assert Placement("dp", 4, 1, registry.DEFAULT, "nccl", "ring") in rows
    four = open_base("two-datacenters", {"cluster.datacenters": 4}).scenario()
    rows4, _ = enumerate_placements(four)
    mixed = {r.pp for r in rows4 if r.span == "dp+pp"}
    assert mixed == {2}                                       # 2 stages, each over 2 of the 4 datacenters
    assert Placement("dp+pp", 2, 1, registry.DEFAULT, "nccl", "ring").label(4) == \
        "DP+PP across 4 DCs · each of 2 stages over 2 DCs · DP flat ring · " + registry.DEFAULT


@pytest.mark.slow
def test_32k_gpus_two_datacenters_within_budget():
    base = open_base("two-datacenters", {"cluster.nodes": 4096, "training.global_batch": 4096,
                                         "cluster.scale_across.bandwidth_Gbps": 51200})
    r = advise(base, top=2)
    assert r.gpus == 32768 and r.enumerated > 250 and r.fit > 200
    assert r.speedup > 2.0
    # Issue 12 asks for 10 s on the reference machine (bench/advise.py: about 1.5 s); twice that
    # leaves room for a loaded CI runner.
    assert r.seconds["total"] < 20


@pytest.mark.parametrize("args, line", [
    (("teaching-8gpu",), "error: cluster.datacenters: advise needs at least 2 datacenters (got 1)"),
    (("two-datacenters", "--top", "0"), "error: --top: 0 is out of range (give 1 to 50)"),
])
def test_invalid_input_is_exit_2_in_one_line(args, line):
    proc = cli("advise", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == line


@pytest.mark.slow
def test_placements_left_to_the_simulation_run_in_chunks_with_progress_and_equal_figures():
    """Datacenters of different GPUs (mixed-generations, here 4 + 4 nodes) are priced by the full
    simulation, 0.3 s a placement at 1,024 GPUs: advise then spreads them over the executor in
    chunks and reports each chunk (the CLI's bar, the app's), and the ranking is the one computed in
    this process, number for number."""
    from explorer.design.executors import ExecutorSpec

    small = {"cluster.datacenters": [{"name": "hopper", "nodes": 4, "gpu": "h100-sxm"},
                                     {"name": "blackwell", "nodes": 4, "gpu": "b200"}],
             "training.global_batch": 64}
    base = open_base("mixed-generations", small)
    seen: list[tuple[int, int]] = []
    pooled = advise(base, top=3, executor=ExecutorSpec(workers=2), progress=lambda d, t: seen.append((d, t)))
    here = advise(base, top=3, executor=ExecutorSpec(workers=1))
    figures = [[(a.label, a.iteration_time_s) for a in r.top] for r in (pooled, here)]
    assert figures[0] == figures[1]
    done = [d for d, _ in seen]
    assert len(seen) > 1 and seen[-1][0] == seen[-1][1] > 100 and done == sorted(done)


@pytest.mark.slow
def test_no_best_is_named_when_no_placement_leaves_the_headroom():
    """A hunt: resnet50-cloud-dp across 2 datacenters on 3.8 GiB GPUs fits with 0.18 GB free at
    best; advise named it "best" and printed a 1.04x gain over the naive placement, where search
    and sweep recommend nothing short of the 1 GB headroom.  Now neither the text, the gain nor
    the result's ``best`` names one; the table still lists what fits."""
    r = advise(open_base("resnet50-cloud-dp", {"cluster.datacenters": 2, "hardware.gpu.memory_GB": 3.8}),
               top=2)
    assert r.top and all(a.figures["fits"] and not a.roomy for a in r.top)
    assert r.best is None and r.speedup is None
    got = cli("advise", "resnet50-cloud-dp", "--set", "cluster.datacenters=2",
              "--set", "hardware.gpu.memory_GB=3.8", "--top", "2")
    code, out = got.returncode, got.stdout
    assert code == 0 and "\nbest:" not in out and "faster" not in out
    free = r.top[0].figures["free_GB"]
    assert out.rstrip().endswith(f"no placement leaves the 1 GB a GPU needs beside the model (the fastest "
                                 f"that fits leaves {free:.2f} GB free): none is recommended")


@pytest.mark.slow
def test_json_holds_the_naive_and_own_rows_the_text_shows():
    """A hunt: advise two-datacenters --top 3 --json gave 3 rows while the text showed the naive and
    the scenario's own placements beside them, and the docstring promised their flags."""
    got = cli("advise", "two-datacenters", "--top", "3", "--json")
    rows = json.loads(got.stdout)
    assert got.returncode == 0 and len(rows) == 5
    assert [(r["naive"], r["own"]) for r in rows[3:]] == [(True, False), (False, True)]
    text = cli("advise", "two-datacenters", "--top", "3").stdout
    assert "\nnaive " in text and "\n  own " in text


@pytest.mark.slow
def test_the_gain_says_per_step_and_names_the_own_placement_when_it_is_the_best():
    """A regression hunt: advise diloco-cross-region ranked a per-step column and said "1.00x
    faster, 0% less time per iteration", the best being the scenario's own placement, unsaid."""
    out = cli("advise", "diloco-cross-region", "--top", "3").stdout.rstrip()
    last = out.splitlines()[-1]
    assert "less time per step" in last or "more time per step" in last
    assert last.endswith("; the best is the scenario's own placement")
