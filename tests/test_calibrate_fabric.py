"""calibrate-fabric: nccl-tests text in, a fabric's fitted constants out.

No raw nccl-tests text of an InfiniBand cluster is shipped in the shared calibration folder (only busbw
tables), so the round-trip tests render nccl-tests output from the explorer's own model with known
constants (said here, not hidden) and check the fit recovers them and the curve within 10 % from
1 MiB up.  The real output of tests/fixtures/nccl/ (2 x 8 H100, A3 Mega; see its README) checks the
parser figure by figure and that the fit improves on the preset's constants."""
from __future__ import annotations

import json

import pytest

from explorer.cli import load_scenario, main
from explorer.network.nccl_table import collective_rows
from explorer.traces import nccl_tests

from conftest import ROOT

A3MEGA = ROOT / "tests" / "fixtures" / "nccl" / "all_reduce_2x8_h100_a3mega.txt"
NDV4 = ROOT / "tests" / "fixtures" / "nccl" / "all_reduce_2x8_a100_ndv4.txt"
SIZES = [8 << k for k in range(31)]          # 8 B .. 8 GiB, as -b 8 -e 8G -f 2
STEM = {"all-reduce": "all_reduce", "all-gather": "all_gather", "all-to-all": "alltoall"}


def _render(op: str, ranks: int, per_node: int, sets: list[str]) -> str:
    """nccl-tests' text (src/common.cu's header and row formats) of the explorer's own prediction."""
    base = [f"cluster.gpus_per_node={per_node}", f"cluster.nodes={-(-ranks // per_node)}",
            "parallelism.tp=1", "parallelism.pp=1", "parallelism.cp=1", f"parallelism.dp={ranks}",
            "cluster.datacenters=1"]
    sc = load_scenario("megatron-gpt3-175b", base + sets)
    rows = collective_rows(sc, op, ranks, SIZES)
    lines = [f"# Collective test starting: {STEM[op]}_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
             "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on     node-{r // per_node} "
              f"device {r % per_node:2d} [0x{r:02x}] NVIDIA A100-SXM4-80GB" for r in range(ranks)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong"
                   "     time   algbw   busbw #wrong"]
    for row in rows:
        t = row["time_s"] * 1e6
        ts = f"{t:7.2f}" if t < 1e4 else f"{t:7.0f}"     # nccl-tests prints 4 significant figures
        fig = f"{ts} {row['algbw_GBps']:7.2f} {row['busbw_GBps']:7.2f}"
        lines.append(f"{row['size_bytes']:12d} {row['size_bytes'] // 4:12d}     float     sum      -1 "
                     f"{fig}      0 {fig}      0")
    lines.append("# Avg bus bandwidth    : 1.0")
    return "\n".join(lines) + "\n"


def _calibrate(capsys, path, *extra) -> dict:
    assert main(["calibrate-fabric", str(path), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_scale_out_curve_is_reproduced_within_10_percent_from_1_mib(capsys, tmp_path):
    """2 x 8 A100 over InfiniBand HDR whose NICs reach 70 % of line rate with a 9 us hop (the
    preset says 96 % and 4.35 us): the fit finds both and reproduces every row >= 1 MiB."""
    path = tmp_path / "all_reduce.txt"
    path.write_text(_render("all-reduce", 16, 8, ["cluster.scale_out.efficiency=0.7",
                                                  "cluster.scale_out.latency_us=9"]), encoding="utf-8")
    out = _calibrate(capsys, path)
    assert out["fabric"]["tier"] == "scale-out" and out["fabric"]["fabric"] == "ib-hdr"
    assert out["fabric"]["efficiency"] == pytest.approx(0.7, rel=0.03)
    assert out["fabric"]["latency_us"] == pytest.approx(9, rel=0.25)
    assert out["before"]["efficiency"] == 0.96
    big = [r for r in out["rows"] if r["size_bytes"] >= 1 << 20]
    assert len(big) == 14
    for r in big:
        assert r["fitted_busbw_GBps"] == pytest.approx(r["busbw_GBps"], rel=0.10), r
    assert out["residual_max_from_1MiB"] < 0.10
    assert out["residual"] < out["before"]["residual"] / 3


def test_a_one_node_curve_fits_the_scale_up_bandwidth(capsys, tmp_path):
    path = tmp_path / "all_gather.txt"
    path.write_text(_render("all-gather", 8, 8, ["cluster.scale_up.bandwidth_GBps=180"]), encoding="utf-8")
    out = _calibrate(capsys, path)
    assert out["op"] == "all-gather" and out["ranks"] == 8
    assert out["fabric"]["tier"] == "scale-up"
    assert out["fabric"]["bandwidth_GBps"] == pytest.approx(180, rel=0.05)
    assert out["residual_max_from_1MiB"] < 0.10


def test_the_out_file_is_a_scenario_with_the_fitted_constants(capsys, tmp_path):
    path = tmp_path / "all_reduce.txt"
    path.write_text(_render("all-reduce", 16, 8, ["cluster.scale_out.efficiency=0.5"]), encoding="utf-8")
    out_file = tmp_path / "calibrated.yaml"
    out = _calibrate(capsys, path, "--out", str(out_file))
    sc = load_scenario(str(out_file))
    assert sc.cluster.scale_out.efficiency == pytest.approx(out["fabric"]["efficiency"])
    assert sc.cluster.scale_out.latency_us == pytest.approx(out["fabric"]["latency_us"])
    assert sc.cluster.nodes == 2 and sc.cluster.gpus_per_node == 8


def test_the_real_a3_mega_output_parses_figure_by_figure():
    run = nccl_tests.read(A3MEGA)
    assert run.ranks == 16 and run.gpus_per_host == 8 and len(run.hosts) == 2
    assert run.device == "NVIDIA H100 80GB HBM3"
    assert len(run.rows) == 31
    assert (run.rows[0].size_bytes, run.rows[0].time_us) == (8, 135.8)
    assert (run.rows[-1].size_bytes, run.rows[-1].busbw_GBps) == (8589934592, 338.82)
    assert nccl_tests.read(A3MEGA, in_place=True).rows[-1].busbw_GBps == 337.35
    assert nccl_tests.bus_factor_op(run, 16) == "all-reduce"


def test_the_real_a3_mega_fit_improves_on_the_preset(capsys):
    """The A3 Mega curve steps at 16-32 MiB (README): the fit cannot reach 10 % there, but it
    must do far better than the preset's constants."""
    out = _calibrate(capsys, A3MEGA, "--set", "cluster.scale_out.fabric=roce-400")
    assert out["fabric"]["fabric"] == "roce-400"
    assert out["residual"] < out["before"]["residual"] / 2
    big = {r["size_bytes"]: r for r in out["rows"]}
    assert big[8589934592]["fitted_busbw_GBps"] == pytest.approx(338.82, rel=0.35)


def test_the_real_ndv4_curve_is_reproduced_from_1_mib_but_for_its_two_kinks(capsys):
    """2 x 8 A100 on HDR InfiniBand (Azure ND96asr_v4; README): from 1 MiB up, 12 of the 14 rows
    within 10 % and the RMS error under 10 %; the two left out sit off the curve's own trend (4 MiB
    is 11 % above the geometric mean of its neighbours' busbw, 32 MiB 9 % below), which two
    constants cannot follow.  The plateau (>= 128 MiB) within 5 %."""
    out = _calibrate(capsys, NDV4, "--ranks", "16", "--gpus-per-node", "8", "--op", "all-reduce",
                     "--set", "cluster.scale_out.fabric=ib-hdr")
    assert out["fabric"]["tier"] == "scale-out"
    big = [r for r in out["rows"] if r["size_bytes"] >= 1 << 20]
    assert len(big) == 14
    off = [r["size_bytes"] for r in big if abs(r["relative_error"]) > 0.10]
    assert off == [4 << 20, 32 << 20]
    assert (sum(r["relative_error"] ** 2 for r in big) / len(big)) ** 0.5 < 0.10
    for r in big:
        if r["size_bytes"] >= 128 << 20:
            assert r["fitted_busbw_GBps"] == pytest.approx(r["busbw_GBps"], rel=0.05), r
    assert out["residual"] < out["before"]["residual"] / 2


@pytest.mark.parametrize(("text", "says"), [
    ("hello\nworld\n", "no nccl-tests table"),
    ("#  size count type\n   1048576   262144  float  sum  -1   96.57  10.86\n", "no nccl-tests table"),
])
def test_bad_input_is_one_line(capsys, tmp_path, text, says):
    path = tmp_path / "out.txt"
    path.write_text(text, encoding="utf-8")
    assert main(["calibrate-fabric", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err and "out.txt" in err, err


@pytest.mark.parametrize(("rows", "says"), [
    # All times 0 stopped the fit with a ZeroDivisionError (exit 1); one row fitted two constants
    # exactly ("0.0 % over 1 rows"); a size of 1e29 bytes was fitted.
    (["  1073741824  268435456  float  sum  -1  0.0  0.0  0.0  0  0.0  0.0  0.0  0"] * 3,
     "has 0 message size"),
    (["  1073741824  268435456  float  sum  -1  6759.0  158.86  297.86  0  6737.4  159.37  298.82  0"],
     "needs at least 3"),
])
def test_rows_that_cannot_be_fitted_are_one_line(capsys, tmp_path, rows, says):
    head = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
            *(f"#  Rank {r:2d} Group  0 Pid {6899 + r} on host{r // 8} device {r % 8} [0000:04:00] "
              "NVIDIA H100 80GB HBM3" for r in range(16)),
            "#       size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong"]
    path = tmp_path / "all_reduce.txt"
    path.write_text("\n".join([*head, *rows]) + "\n", encoding="utf-8")
    assert main(["calibrate-fabric", str(path), "--json", "--op", "all-reduce"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err and "all_reduce.txt" in err, err


def test_an_output_that_names_neither_ranks_nor_op_asks_for_them(capsys, tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text("     1048576        262144     float    none      -1   96.57   10.86   10.18      0"
                    "   96.62   10.85   10.17      0\n", encoding="utf-8")
    assert main(["calibrate-fabric", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --ranks") or err.startswith("error: --op"), err
    assert main(["calibrate-fabric", str(path), "--json", "--ranks", "16"]) == 2
    assert "--op" in capsys.readouterr().err


def test_without_rank_lines_the_hosts_must_be_given(capsys):
    """ND A100 v4's output (2 x 8 GPUs over InfiniBand) has no '#  Rank' lines: taken as one 16-GPU
    host it fitted NVLink to 243.7 GB/s (a hunt); now it asks for --gpus-per-node, and with 8 it fits
    the scale-out tier."""
    assert main(["calibrate-fabric", str(NDV4), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --gpus-per-node: ") and len(err.splitlines()) == 1
    assert "no '#  Rank' lines" in err and "16 ranks" in err
    out = _calibrate(capsys, NDV4, "--gpus-per-node", "8")
    assert out["fabric"]["tier"] == "scale-out"
    assert out["fabric"]["efficiency"] == pytest.approx(0.9075, abs=5e-4)


def test_the_fit_starts_from_the_named_gpus_own_nvlink(capsys, tmp_path):
    """An H100 output fitted from megatron-gpt3-175b (A100 NVSwitch, 300 GB/s): the start is the
    H100 preset's 450 GB/s (a hunt found 300, a 19.7 % residual before the fit)."""
    text = _render("all-gather", 8, 8, ["hardware.gpu=h100-sxm", "cluster.scale_up.bandwidth_GBps=450"])
    path = tmp_path / "h100.txt"
    path.write_text(text.replace("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"), encoding="utf-8")
    out = _calibrate(capsys, path)
    assert out["fabric"]["tier"] == "scale-up"
    assert out["before"]["bandwidth_GBps"] == 450
    assert out["fabric"]["bandwidth_GBps"] == pytest.approx(450, rel=0.02)
