"""``search --json``'s overrides reproduce each row with ``run --set`` on the scenario searched (a hunt
found pipedream-vgg16's rows at other times — the file's stage_layers stayed — and with --gpus the
nodes left out, so the cluster no longer fitted)."""
from __future__ import annotations

import pytest

from explorer.design import open_base, search
from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT


@pytest.mark.parametrize("name,gpus", [("pipedream-vgg16", None), ("dlrm-dcnv2", 16)])
def test_every_rows_overrides_rerun_its_figures(name, gpus):
    res = search(open_base(name), gpus=gpus, top=3)
    assert res.top
    for c in res.top:
        ov = c.to_json()["overrides"]
        r = simulate(load(ROOT / "scenarios" / f"{name}.yaml", ov))
        assert r.iteration_time_s == pytest.approx(c.iteration_time_s, rel=1e-9), ov
        if gpus:
            sc = load(ROOT / "scenarios" / f"{name}.yaml", ov)
            assert sc.cluster.gpus == gpus


@pytest.mark.slow
def test_a_run_plans_search_ranks_only_layouts_its_phases_take():
    """Found by a hunt: searching llama3-405b-pretraining ranked four layouts 1.31x faster that run
    refuses (a phase's explicit dp no longer fills its cluster); every row now passes the plan."""
    from explorer.design.space import Space
    from explorer.run.phases import plan
    res = search(open_base("llama3-405b-pretraining"), top=2,
                 space=Space(schedules=("interleaved",), zero=(1,), recompute=("none",)))
    assert res.top
    for c in res.top:
        plan(load(ROOT / "scenarios" / "llama3-405b-pretraining.yaml", c.to_json()["overrides"]))


@pytest.mark.slow
def test_a_run_plans_phases_are_checked_before_ranking():
    """A verdicts hunt: the phases were checked only on the ~203 layouts priced exactly, all of them
    refused (the phases pin dp 64 on 1,024 nodes and dp 8 on 2,048), and the search called the
    scenario's own layout the fastest; the same layout at vpp 4 (5.970 s against 7.124 s) takes every
    phase.  Layouts the plan's arithmetic refuses are now invalid under training.phases before
    ranking (design/phase_fit.py)."""
    from explorer.design.space import Space
    res = search(open_base("llama3-405b-pretraining"), top=2,
                 space=Space(schedules=("interleaved", "1f1b"), zero=(1, 2), recompute=("none",)))
    assert dict(res.reasons).get("training.phases", 0) > 0
    best = res.top[0]
    assert not best.baseline and best.layout.vpp > 2
    assert res.baseline is not None and best.iteration_time_s < res.baseline.iteration_time_s / 1.15
    assert "faster than the scenario's own layout" in res.verdict()


def test_weak_scaling_keeps_a_pipedream_scenarios_batch_at_its_own_size():
    """Found by a hunt: at pipedream-vgg16's own 16 GPUs the weak curve ran 7,680 images (tp*pp = 2
    taken for a replica), 1.160 s against run's 0.145 s with 960."""
    from explorer.design.scaling import scaling
    pt = next(p for p in scaling(open_base("pipedream-vgg16"), gpus=[16]) if p.gpus == 16)
    assert pt.valid and pt.global_batch == 960
    assert pt.figures["iteration_time_s"] == pytest.approx(
        simulate(load(ROOT / "scenarios" / "pipedream-vgg16.yaml")).iteration_time_s, rel=1e-9)


@pytest.mark.slow
def test_the_verdict_says_when_the_own_layout_itself_lacks_the_headroom():
    """Found by a hunt: with 82 GB of headroom nothing was ranked, and the verdict called the
    scenario's own layout, 74.0 GB free, "the fastest found" with 82 GB to spare."""
    res = search(open_base("teaching-8gpu"), top=2, headroom_GB=82)
    assert res.roomy == 0
    assert res.verdict().startswith("nothing fits with 82 GB to spare; the scenario's own layout, shown, "
                                    "leaves only 74.0 GB free")


@pytest.mark.parametrize("args,field", [(["--sizes", "1.5"], "--sizes"),
                                        (["--sizes", "1M", "--gpus-per-thread", "3"], "--gpus-per-thread")])
def test_collective_refuses_a_fractional_byte_and_ranks_no_thread_count_divides(args, field):
    """Found by a hunt: --sizes 1.5 was priced as 1 byte, and 8 ranks in threads of 3 accepted."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "explorer", "collective", "teaching-8gpu", "--op",
                           "all-reduce", "--ranks", "8", *args], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {field}: ")
    assert proc.stderr.strip().count("\n") == 0


def test_a_pcie_node_is_not_called_nvlink():
    """Found by a hunt: pipedream-vgg16's V100 PCIe node boxes read "PCIe" beside a legend and
    sentence that said "NVLink / NVSwitch (scale-up)"."""
    from explorer import figures
    from explorer.vocabulary import tier_label
    assert tier_label("scale-up", "pcie") == "PCIe in the node (scale-up)"
    assert tier_label("scale-up", "nvswitch") == "NVLink / NVSwitch (scale-up)"
    sc = load(ROOT / "scenarios" / "pipedream-vgg16.yaml")
    names = [t.name for t in figures.topology(sc, {"scale-up": 0.08}).data if t.name and "busy" in t.name]
    assert names[0].startswith("PCIe in the node (scale-up): 8% busy")
    legend = [t.name for t in figures.traffic_by_tier({"pp": {"scale-up": 1e9}}, scale_up_kind="pcie").data]
    assert legend == ["PCIe in the node (scale-up)"]


def test_sweep_and_scaling_rows_rerun_with_run_set(capsys):
    """A verdicts hunt: teaching-8gpu's file sets dp 2, so a sweep row (tp 1, pp 2) or a scaling
    size (16 GPUs) did not rerun from its overrides ("set dp = 4").  Valid rows now carry
    ``run_overrides``, the overrides with the derived dp spelt out, and run --set takes them."""
    import json

    from explorer.cli import main
    assert main(["sweep", "teaching-8gpu", "--vary", "parallelism.pp=2", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["run_overrides"] == {"parallelism.pp": 2, "parallelism.dp": 4}
    assert main(["scaling", "teaching-8gpu", "--gpus", "16", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    pt = (got if isinstance(got, list) else got["points"])[0]
    for r in (row, pt):
        ov, t = r["run_overrides"], r["iteration_time_s"]
        sets = [a for k, v in ov.items() for a in ("--set", f"{k}={v}")]
        assert main(["run", "teaching-8gpu", *sets, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["iteration_time_s"] == pytest.approx(t, rel=1e-9)
