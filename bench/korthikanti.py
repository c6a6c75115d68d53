"""Simulation cost and accuracy on the eight Korthikanti et al. 2022 Table 5 rows, each on its
published layout (issues 15 and 33).

Run: python bench/korthikanti.py [--n 100] [--rounds 3] [--procs 3] [--quick]

Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, "Reducing Activation Recomputation
in Large Transformer Models" (MLSys 2023, arXiv 2205.05198): Table 3 gives the four GPT models and
their layouts, Table 5 their iteration times with full recomputation and with selective
recomputation plus sequence parallelism.  The rows, layouts included (175B and 530B run Megatron-LM's
interleaved schedule with 3 virtual stages, 22B and 1T one chunk per GPU, i.e. 1F1B), are
explorer/data/reference/korthikanti_table5.csv, read by explorer/fidelity/korthikanti.py; the bench
builds every scenario from that table and checks that the scenario carries it.

Printed, for every row:

- the layout it ran: tp pp dp vpp, micro-batch, global batch, schedule, recomputation, sequence
  parallelism;
- which path ``explorer.simulate.simulate`` took (explorer/fold/run.routed) — the array fold
  (explorer/fold/arrays), the full count as one array run (explorer/fold/arrays/direct.py), the
  task fold (explorer/fold/steady.py) or the full simulation — folded or not and over what, and,
  for each path not taken, why not (the folds' own reasons and the cost model's,
  explorer/fold/plan.NotFolded, explorer/fold/cost.py); whether the estimator's fast mode
  (estimate_many(..., exact=False), explorer/estimate/fast.py) extrapolates the row, and why not;
  the path reported is checked against the Result simulate() returned;
- tasks of the full task graph and tasks the simulation scheduled; the unfolded path's phases
  (graph build, engine, post-engine analysis);
- in-process milliseconds per ``simulate()`` (median of ``--rounds`` rounds of N evaluations; N
  shrinks for slow rows so that a round stays near ``--budget`` seconds), and the engine's full
  simulation where another path was taken; the estimator's fast mode and llm-analysis (PyPI; it
  has no virtual stages, so it runs every row as 1F1B) on the same row;
- predicted against published seconds per iteration.

Then the 1T row at 512 and 4,096 micro-batches and with the interleaved schedule (vpp 2), and
whole processes (``python -m explorer run FILE --json``) with llm-analysis's beside them. The load
average of the machine is printed at the start and the end. Calculon is not on PyPI (the
``calculon`` name there is an unrelated producer-consumer library): with ``--calculon DIR`` (a
checkout of calculon-ai/calculon) it is timed on the same rows and rounds beside each row
(bench/calculon_side.py), else issue 15's figures are quoted as constants.
"""
from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calculon_side import calculon_calls  # noqa: E402  (bench/, on sys.path as the script's folder)

from explorer.estimate.fast import estimate_many, fast_path  # noqa: E402
from explorer.fidelity.korthikanti import Table5Row, table5_raw, table5_rows  # noqa: E402
from explorer.fold.arrays.lazy import LazyTasks  # noqa: E402
from explorer.fold.run import ARRAY_RUN, ARRAYS, FULL, TASKS, routed  # noqa: E402
from explorer.pricing.profile import row_profile  # noqa: E402
from explorer.scenario import Scenario, from_dict  # noqa: E402
from explorer.simulate import Result, simulate  # noqa: E402

# Issue 15's reference figures for Calculon (measured by the issue's author on this kind of
# machine; Calculon is not installable from PyPI): quoted, not measured here.
CALCULON_IN_PROCESS_MS = 1.6        # per configuration, in-process
CALCULON_PROCESS_1T_S = 0.26        # the 1T row as a whole process
TARGET_IN_PROCESS_MS = 20.0         # issue 15: every row fully simulated in at most 20 ms


def rows() -> list[Table5Row]:
    """The bench's rows: Table 5 as explorer/data/reference/korthikanti_table5.csv gives it."""
    return table5_rows()


def layout_of(sc: Scenario) -> dict[str, object]:
    """The layout a scenario runs: parallel degrees, virtual stages, batch, schedule, recomputation
    and sequence parallelism (what the bench prints and checks against the published row)."""
    par, tr = sc.parallelism, sc.training
    return {"tp": par.tp, "pp": par.pp, "dp": sc.dp, "vpp": par.vpp, "mb": tr.micro_batch,
            "gbs": tr.global_batch, "schedule": par.schedule, "recompute": tr.recompute,
            "SP": par.sequence_parallel}


def published_layout(row: Table5Row, global_batch: int | None = None) -> dict[str, object]:
    """The layout of ``row`` as published (:func:`layout_of`'s keys)."""
    return {"tp": row.tp, "pp": row.pp, "dp": row.dp, "vpp": row.vpp, "mb": row.micro_batch,
            "gbs": global_batch or row.global_batch, "schedule": row.schedule, "recompute": row.recompute,
            "SP": row.sequence_parallel}


def scenario(row: Table5Row, global_batch: int | None = None) -> Scenario:
    """The validated scenario of ``row``; raises AssertionError unless it runs the row's published
    layout (a bench that ran another layout than the one it names would be worse than none)."""
    sc = from_dict(table5_raw(row, global_batch))
    got, want = layout_of(sc), published_layout(row, global_batch)
    assert got == want, f"{row.label}: the scenario runs {got}, the published layout is {want}"
    return sc


def layout(sc: Scenario) -> str:
    """``tp 8 pp 8 dp 1 vpp 3 mb 1 gbs 64 schedule interleaved recompute full SP off``."""
    shown = {k: ("on" if v else "off") if isinstance(v, bool) else v for k, v in layout_of(sc).items()}
    return " ".join(f"{k} {v}" for k, v in shown.items())


# -- which path ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """The path simulate() took on a row, and why the faster ones were not taken."""

    taken: str                       # ARRAYS | ARRAY_RUN | TASKS | FULL (explorer/fold/run.py)
    arrays: str | None               # why the array fold was not taken (None: taken)
    array_run: str | None            # why the full count was not one array run (None: taken or not needed)
    tasks: str | None                # why the task fold was not taken (None: taken or not needed)
    fast: str | None                 # why the estimator's fast mode does not extrapolate (None: it does)

    def over(self) -> str:
        """What the simulation ran over: array rows (a fold's reduced ones or the full count),
        task objects of reduced runs, or every task."""
        return {ARRAYS: "arrays (reduced runs)", ARRAY_RUN: "arrays (full count)",
                TASKS: "tasks (reduced runs)", FULL: "tasks (every task)"}[self.taken]

    def describe(self) -> str:
        folded = "folded" if self.taken in (ARRAYS, TASKS) else "not folded"
        out = [f"path: {self.taken} ({folded}, over {self.over()})"]
        named = (("array fold", self.arrays), ("array run", self.array_run), ("task fold", self.tasks))
        out += [f"{name} not taken: {why}" for name, why in named if why]
        out.append("estimator fast mode: " + (self.fast or "extrapolated from two short counts"))
        return "\n    ".join(out)


def route(sc: Scenario, res: Result) -> Route:
    """The path simulate() takes on ``sc`` (explorer/fold/run.routed: array fold, array run, task
    fold, full), checked against the Result ``res`` it returned."""
    how = routed(sc)[1]
    # The Result says which path made it: fold info when folded, lazy tasks over arrays.
    lazy = isinstance(res.tasks, LazyTasks)
    actual = (ARRAYS if lazy else TASKS) if res.fold is not None else ARRAY_RUN if lazy else FULL
    assert actual == how.taken, f"{sc.name}: simulate() took the {actual}, the route says {how.taken}"
    return Route(how.taken, how.arrays, how.array_run, how.tasks, fast_path(row_profile(sc)))


# -- timing --------------------------------------------------------------------------------------
def timed(fn: Callable[[], object], n: int, rounds: int, budget_s: float) -> tuple[float, int]:
    """Median over ``rounds`` rounds of the mean seconds of one call, with N calls per round (at
    most ``n``, fewer when one call is slow so that a round stays near ``budget_s``)."""
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    n = max(1, min(n, int(budget_s / max(one, 1e-9))))
    per_round = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per_round.append((time.perf_counter() - t0) / n)
    return statistics.median(per_round), n


def simulate_with(sc: Scenario, fold: bool) -> Result:
    """simulate() folded (the default) or in full (before explorer/fold/steady.py existed: always in full)."""
    if "fold" in inspect.signature(simulate).parameters:
        return simulate(sc, fold=fold)
    return simulate(sc)


def phases(sc: Scenario) -> dict[str, float]:
    """Seconds of the unfolded path's phases: graph build, engine, post-engine analysis."""
    from explorer.engine.gc_pause import paused_collector
    from explorer.engine.scheduler import run
    from explorer.network.groups import Network
    from explorer.taskgraph.builder import IterationBuilder

    with paused_collector():         # simulate() pauses the cyclic collector; time the phases alike
        t0 = time.perf_counter()
        graph = IterationBuilder(sc, Network(sc)).build()
        t1 = time.perf_counter()
        run(graph)
        t2 = time.perf_counter()
    simulate_with(sc, False)
    t3 = time.perf_counter()
    # Post-engine analysis: what a full simulate() costs beyond building and running the graph.
    return {"build": t1 - t0, "engine": t2 - t1, "analysis": max(t3 - t2 - (t2 - t0), 0.0),
            "tasks": len(graph)}


def scheduled_tasks(res: Result) -> int:
    """Tasks the simulation scheduled: the reduced runs' when folded, else every task."""
    return res.fold.simulated_tasks if res.fold is not None else len(res.tasks)


# -- llm-analysis ---------------------------------------------------------------------------------
LLM_ANALYSIS_SNIPPET = """
import logging, sys
from llm_analysis.analysis import LLMAnalysis, ActivationRecomputation, logger
from llm_analysis.config import (ModelConfig, ParallelismConfig, get_gpu_config_by_name,
                                 get_dtype_config_by_name)
logger.setLevel(logging.ERROR)
"""


def llm_analysis_call(row: Table5Row) -> Callable[[], dict] | None:
    """One llm-analysis training estimate of the row (A100 SXM 80 GB, fp16, its default
    efficiencies; no virtual stages: llm-analysis 0.2.2's ParallelismConfig has none), or None
    when llm-analysis is not installed."""
    try:
        from llm_analysis.analysis import ActivationRecomputation, LLMAnalysis, logger
        from llm_analysis.config import (
            ModelConfig,
            ParallelismConfig,
            get_dtype_config_by_name,
            get_gpu_config_by_name,
        )
    except ImportError:
        return None
    logger.setLevel(logging.ERROR)
    model = ModelConfig(name=row.model, num_layers=row.layers, n_head=row.heads, hidden_dim=row.hidden,
                        vocab_size=51200, max_seq_len=2048)
    gpu, dtype = get_gpu_config_by_name("a100-sxm-80gb"), get_dtype_config_by_name("w16a16e16")
    sel = row.recompute == "selective"
    recompute = ActivationRecomputation.SELECTIVE if sel else ActivationRecomputation.FULL

    def call() -> dict:
        a = LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=row.tp, pp_size=row.pp, dp_size=row.dp,
                                                             sp_size=row.tp if row.sequence_parallel else 1))
        return a.training(batch_size_per_gpu=row.micro_batch, global_batch_size=row.global_batch,
                          seq_len=2048, activation_recomputation=recompute, flash_attn=False)
    return call


def llm_analysis_process_s(row: Table5Row, repeat: int) -> float:
    """Median seconds of a whole Python process that imports llm-analysis and estimates the row
    (full recomputation, as the row with full recomputation is the one this is printed for)."""
    code = LLM_ANALYSIS_SNIPPET + (
        f"m = ModelConfig(name='x', num_layers={row.layers}, n_head={row.heads}, "
        f"hidden_dim={row.hidden}, vocab_size=51200, max_seq_len=2048)\n"
        f"a = LLMAnalysis(m, get_gpu_config_by_name('a100-sxm-80gb'), get_dtype_config_by_name('w16a16e16'), "
        f"ParallelismConfig(tp_size={row.tp}, pp_size={row.pp}, dp_size={row.dp}, sp_size=1))\n"
        f"print(a.training(batch_size_per_gpu={row.micro_batch}, global_batch_size={row.global_batch}, "
        "seq_len=2048, activation_recomputation=ActivationRecomputation.FULL, "
        "flash_attn=False)['latency_per_iter'])\n")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def explorer_process_s(raw: dict, repeat: int, workdir: Path) -> float:
    """Median seconds of ``python -m explorer run FILE --json`` on the row."""
    path = workdir / "row.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "explorer", "run", str(path), "--json"], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def load() -> str:
    """The machine's 1, 5 and 15 minute load averages (what ``uptime`` prints)."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


# -- report ---------------------------------------------------------------------------------------
def report_rows(args: argparse.Namespace) -> None:
    """Per row: its layout and paths, then one line of tasks, times and seconds per iteration."""
    print("# layouts and paths (Table 3 layouts, SC21 setup; explorer/data/reference/korthikanti_table5.csv)")
    measured = []
    for row in rows():
        sc = scenario(row)
        res = simulate_with(sc, True)
        how = route(sc, res)
        print(f"{row.label:<11} {layout(sc)}\n    {how.describe()}")
        measured.append((row, sc, res, how))
    print(f"\n# times in ms (in-process: median of {args.rounds} rounds of N evaluations); seconds per "
          "iteration")
    print(f"{'row':<11} {'path':<7} {'tasks':>8} {'sched.':>7} {'build':>7} {'engine':>7} {'analys.':>7} "
          f"{'simulate':>9} {'unfolded':>9} {'fast est':>8} {'llm-an.':>7} {'pred. s':>7} {'paper s':>7} "
          f"{'error':>6}")
    slowest = 0.0
    calculon = calculon_calls(Path(args.calculon)) if args.calculon else None
    side: list[tuple[str, float, float, float]] = []
    short = {ARRAYS: "arrays", ARRAY_RUN: "arr.run", TASKS: "tasks", FULL: "full"}
    for row, sc, res, how in measured:
        ph = phases(sc)
        ms, _ = timed(lambda sc=sc: simulate_with(sc, True), args.n, args.rounds, args.budget)
        slowest = max(slowest, ms)
        if how.taken != FULL:
            full, _ = timed(lambda sc=sc: simulate_with(sc, False), args.n, args.rounds, args.budget)
            unfolded = f"{full * 1e3:9.2f}"
        else:
            unfolded = f"{'(same)':>9}"
        est, _ = timed(lambda sc=sc: estimate_many([sc], exact=False), args.n, args.rounds, args.budget)
        call = llm_analysis_call(row)
        la = f"{timed(call, args.n, args.rounds, args.budget)[0] * 1e3:7.3f}" if call else f"{'n/a':>7}"
        it = res.iteration_time_s
        if calculon is not None:
            call_c = calculon[0](row)
            side.append((row.label, ms, timed(call_c, args.n, args.rounds, args.budget)[0], call_c()))
        print(f"{row.label:<11} {short[how.taken]:<7} {ph['tasks']:>8,} {scheduled_tasks(res):>7,} "
              f"{ph['build'] * 1e3:>7.1f} {ph['engine'] * 1e3:>7.1f} {ph['analysis'] * 1e3:>7.1f} "
              f"{ms * 1e3:>9.2f} {unfolded} {est * 1e3:>8.2f} {la} {it:>7.2f} {row.measured_s:>7.2f} "
              f"{(it / row.measured_s - 1) * 100:>+5.1f}%")
    if calculon is None:
        print(f"slowest row in-process: {slowest * 1e3:.1f} ms "
              f"(issue 15's target {TARGET_IN_PROCESS_MS:g} ms); Calculon (issue 15's figure, "
              "not measured here: give --calculon DIR): "
              f"{CALCULON_IN_PROCESS_MS} ms per row in-process")
        return
    print(f"slowest row in-process: {slowest * 1e3:.1f} ms (issue 15's target {TARGET_IN_PROCESS_MS:g} ms)")
    print(f"\n# side by side with Calculon, checkout {calculon[1]}, same rounds, in-process ms per row "
          "(issue 35's target: at most 2x)")
    for label, ours, theirs, pred in side:
        print(f"{label:<11} explorer {ours * 1e3:8.2f}   Calculon {theirs * 1e3:7.2f} "
              f"(predicts {pred:6.2f} s)   ratio {ours / theirs:5.2f}x")


def report_1t(args: argparse.Namespace) -> None:
    """The 1T row (full recomputation) at its 512 micro-batches and at 4,096."""
    print("\n# the 1T row with more micro-batches (global batch 512 -> 4,096; full recomputation)")
    one_t = next(r for r in rows() if r.model == "1T" and r.recompute == "full")
    costs = {}
    for gb in (512, 4096):
        sc = scenario(one_t, gb)
        res = simulate_with(sc, True)
        how = res.fold.describe() if res.fold is not None else "not folded"
        costs[gb], n = timed(lambda sc=sc: simulate_with(sc, True), args.n, args.rounds, args.budget)
        print(f"{gb:>6,} micro-batches ({layout(sc)}): {costs[gb] * 1e3:9.2f} ms, {route(sc, res).taken} "
              f"(N={n}), {scheduled_tasks(res):,} tasks scheduled; {how}")
    print(f"ratio 4,096 / 512: {costs[4096] / costs[512]:.2f} (issue 15's target <= 1.5)")
    # Megatron's interleaved schedule on the same row (not a published layout: Table 3 runs 1T with
    # one chunk per GPU): 2 virtual stages, 512 micro-batches, 8 periods of pp (issue 35).
    raw = table5_raw(one_t, 512)
    raw["parallelism"].update(schedule="interleaved", vpp=2)
    sc = from_dict(raw)
    res = simulate_with(sc, True)
    r = route(sc, res)
    cost, n = timed(lambda: simulate_with(sc, True), args.n, args.rounds, args.budget)
    print(f"   512 micro-batches ({layout(sc)}): {cost * 1e3:9.2f} ms, {r.taken} over {r.over()} (N={n}), "
          f"{scheduled_tasks(res):,} tasks; ratio to the 1F1B row: {cost / costs[512]:.2f} "
          "(issue 35's target <= 2)")


def report_processes(args: argparse.Namespace) -> None:
    """Whole processes: the explorer's CLI and llm-analysis on every row."""
    # An installed package's modules are byte-compiled once (pip does it; Python caches them on first
    # import); an environment with PYTHONDONTWRITEBYTECODE set (this sandbox) would otherwise compile
    # every module at every start, about 0.1 s that neither a user nor Calculon's figure pays.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "explorer")], check=True)
    print(f"\n# whole processes: python -m explorer run ROW.json --json (median of {args.procs}), seconds; "
          "modules byte-compiled (python -m compileall explorer)")
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows():
            scenario(row)                    # the layout check
            t = explorer_process_s(table5_raw(row), args.procs, Path(tmp))
            full = row.recompute == "full"
            la = f"{llm_analysis_process_s(row, args.procs):.3f}" if llm_analysis_call(row) and full else ""
            extra = f"   llm-analysis process {la} s (vpp 1)" if la else ""
            ref = f"   Calculon {CALCULON_PROCESS_1T_S} s (issue 15's figure)" if row.model == "1T" else ""
            print(f"{row.label:<11} {t:6.3f} s{extra}{ref}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"bare Python start-up for reference: {time.perf_counter() - t0:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="evaluations per round (fewer for slow rows)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per timing round at most (about)")
    ap.add_argument("--procs", type=int, default=3, help="whole-process runs per row (median)")
    ap.add_argument("--calculon", metavar="DIR",
                    help="a checkout of calculon-ai/calculon to time side by side")
    ap.add_argument("--quick", action="store_true", help="one round, a 0.5 s budget, one process run")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.budget, args.procs = 1, 0.5, 1
    print(f"# Korthikanti et al. 2022 Table 5 on its published layouts; start: {load()}")
    report_rows(args)
    report_1t(args)
    report_processes(args)
    print(f"# end: {load()}")


if __name__ == "__main__":
    main()
