"""Simulation cost on the eight Korthikanti et al. 2022 Table 5 configurations (issue 15).

Run: python bench/korthikanti.py [--n 100] [--rounds 3] [--procs 3] [--quick]

Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, "Reducing Activation Recomputation
in Large Transformer Models" (MLSys 2023, arXiv 2205.05198): Table 3 gives the four GPT models and
their layouts (sequence 2048, A100 80 GB on Selene), Table 5 their iteration times with full
recomputation and with selective recomputation plus sequence parallelism.  The scenarios are the
SC21 setup of explorer/fidelity/calibration.py (``megatron_raw``) with Table 3's shapes.

Printed, for every row: tasks of the full task graph and tasks the simulation scheduled (fewer when
the steady state folds, explorer/fold/steady.py; for these pipelines without data parallelism the four
reduced runs are array columns, explorer/fold/arrays, and "folded" counts their tasks), the
unfolded path's phases (graph build, engine,
post-engine analysis), in-process milliseconds per evaluation of ``explorer.simulate.simulate``
(median of ``--rounds`` rounds of N evaluations; N shrinks for slow variants so a round stays near
``--budget`` seconds) folded and unfolded; then the 1T row at 512 and 4,096 micro-batches, whole
processes (``python -m explorer run FILE --json``), and llm-analysis (PyPI) side by side on the same
rows.  Calculon is not on PyPI (the ``calculon`` name there is an unrelated producer-consumer
library), so its figures are the issue's, quoted as constants.
"""
from __future__ import annotations

import argparse
import inspect
import json
import logging
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

from explorer.fidelity.calibration import MegatronRow, megatron_raw  # noqa: E402
from explorer.scenario import Scenario, from_dict  # noqa: E402
from explorer.simulate import simulate  # noqa: E402

# Issue 15's reference figures for Calculon (measured by the issue's author on this kind of
# machine; Calculon is not installable from PyPI): quoted, not measured here.
CALCULON_IN_PROCESS_MS = 1.6        # per configuration, in-process
CALCULON_PROCESS_1T_S = 0.26        # the 1T row as a whole process
TARGET_IN_PROCESS_MS = 20.0         # issue 15: every row fully simulated in at most 20 ms


@dataclass(frozen=True)
class Shape:
    """One model of Korthikanti Table 3 (micro-batch 1 except 22B's 4; sequence 2048)."""

    name: str
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    global_batch: int
    micro_batch: int
    paper_full_s: float          # Table 5: iteration time with full recomputation
    paper_selective_s: float     # Table 5: selective recomputation + sequence parallelism


SHAPES = (
    Shape("22B", 64, 6144, 48, 8, 1, 8, 4, 4, 1.42, 1.10),
    Shape("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 18.13, 13.75),
    Shape("530B", 128, 20480, 105, 8, 35, 280, 280, 1, 49.05, 37.83),
    Shape("1T", 160, 25600, 128, 8, 64, 512, 512, 1, 94.42, 71.49),
)


def raw_row(shape: Shape, selective: bool, global_batch: int | None = None) -> dict:
    """The scenario mapping of one Table 5 row: SC21's setup (calibration.megatron_raw) with the
    model's shape, its micro-batch, and either full recomputation or selective recomputation with
    sequence parallelism."""
    dp = shape.gpus // (shape.tp * shape.pp)
    gb = global_batch or shape.global_batch
    raw = megatron_raw(MegatronRow(0.0, shape.heads, shape.hidden, shape.layers, shape.tp, shape.pp, dp,
                                   shape.gpus, gb, 0.0))
    raw["name"] = f"Korthikanti Table 5: {shape.name} ({'selective + SP' if selective else 'full'})"
    raw["training"].update(micro_batch=shape.micro_batch, recompute="selective" if selective else "full")
    raw["parallelism"]["sequence_parallel"] = selective
    return raw


def rows() -> list[tuple[str, Shape, bool]]:
    return [(f"{s.name} {'sel+SP' if sel else 'full'}", s, sel) for s in SHAPES for sel in (False, True)]


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


def simulate_with(sc: Scenario, fold: bool):
    """simulate() folded (the default) or in full (before explorer/fold/steady.py existed: always in full)."""
    if "fold" in inspect.signature(simulate).parameters:
        return simulate(sc, fold=fold)
    return simulate(sc)


def phases(sc: Scenario) -> dict[str, float]:
    """Seconds of the unfolded path's phases: graph build, engine, post-engine analysis."""
    from explorer.engine.scheduler import run
    from explorer.network.groups import Network
    from explorer.taskgraph.builder import IterationBuilder

    try:                      # simulate() pauses the cyclic collector; time the phases alike
        from explorer.engine.gc_pause import paused_collector
    except ImportError:       # before explorer/engine/gc_pause.py existed
        from contextlib import nullcontext as paused_collector

    with paused_collector():
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


def fold_stats(sc: Scenario) -> tuple[int, str]:
    """Tasks the folded simulation scheduled and how it folded (explorer/fold/steady.py; "over arrays"
    when explorer/fold/arrays ran the reduced runs)."""
    res = simulate_with(sc, True)
    fold = getattr(res, "fold", None)
    if fold is None:
        return len(res.tasks), "not folded"
    arrays = type(res.tasks).__name__ == "LazyTasks"
    return fold.simulated_tasks, fold.describe() + (" over arrays" if arrays else "")


# -- llm-analysis ---------------------------------------------------------------------------------
LLM_ANALYSIS_SNIPPET = """
import logging, sys
from llm_analysis.analysis import LLMAnalysis, ActivationRecomputation, logger
from llm_analysis.config import (ModelConfig, ParallelismConfig, get_gpu_config_by_name,
                                 get_dtype_config_by_name)
logger.setLevel(logging.ERROR)
"""


def llm_analysis_call(shape: Shape, selective: bool) -> Callable[[], dict] | None:
    """One llm-analysis training estimate of the row (A100 SXM 80 GB, fp16, its default
    efficiencies), or None when llm-analysis is not installed."""
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
    model = ModelConfig(name=shape.name, num_layers=shape.layers, n_head=shape.heads, hidden_dim=shape.hidden,
                        vocab_size=51200, max_seq_len=2048)
    gpu, dtype = get_gpu_config_by_name("a100-sxm-80gb"), get_dtype_config_by_name("w16a16e16")
    dp = shape.gpus // (shape.tp * shape.pp)
    recompute = ActivationRecomputation.SELECTIVE if selective else ActivationRecomputation.FULL

    def call() -> dict:
        a = LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=shape.tp, pp_size=shape.pp, dp_size=dp,
                                                             sp_size=shape.tp if selective else 1))
        return a.training(batch_size_per_gpu=shape.micro_batch, global_batch_size=shape.global_batch,
                          seq_len=2048, activation_recomputation=recompute, flash_attn=False)
    return call


def llm_analysis_process_s(shape: Shape, repeat: int) -> float:
    """Median seconds of a whole Python process that imports llm-analysis and estimates the row."""
    dp = shape.gpus // (shape.tp * shape.pp)
    code = LLM_ANALYSIS_SNIPPET + (
        f"m = ModelConfig(name='x', num_layers={shape.layers}, n_head={shape.heads}, "
        f"hidden_dim={shape.hidden}, vocab_size=51200, max_seq_len=2048)\n"
        f"a = LLMAnalysis(m, get_gpu_config_by_name('a100-sxm-80gb'), get_dtype_config_by_name('w16a16e16'), "
        f"ParallelismConfig(tp_size={shape.tp}, pp_size={shape.pp}, dp_size={dp}, sp_size=1))\n"
        f"print(a.training(batch_size_per_gpu={shape.micro_batch}, global_batch_size={shape.global_batch}, "
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


# -- report ---------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="evaluations per round (fewer for slow variants)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per timing round at most (about)")
    ap.add_argument("--procs", type=int, default=3, help="whole-process runs per row (median)")
    ap.add_argument("--quick", action="store_true", help="one round, a 0.5 s budget, one process run")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.budget, args.procs = 1, 0.5, 1
    print("# Korthikanti et al. 2022 Table 5 rows (Table 3 shapes, SC21 setup); times in ms unless noted")
    print(f"# in-process: median of {args.rounds} rounds of N evaluations of explorer.simulate.simulate")
    head = (f"{'row':<14} {'tasks':>8} {'folded':>7} {'build':>8} {'engine':>8} {'analysis':>8} "
            f"{'unfolded':>9} {'folded':>8} {'speed-up':>8} {'llm-an.':>8} {'iter s':>7} {'paper s':>7}")
    print(head)
    slowest = 0.0
    for label, shape, sel in rows():
        sc = from_dict(raw_row(shape, sel))
        ph = phases(sc)
        simulated, _ = fold_stats(sc)
        full, _ = timed(lambda sc=sc: simulate_with(sc, False), args.n, args.rounds, args.budget)
        folded, _ = timed(lambda sc=sc: simulate_with(sc, True), args.n, args.rounds, args.budget)
        slowest = max(slowest, folded)
        call = llm_analysis_call(shape, sel)
        la = f"{timed(call, args.n, args.rounds, args.budget)[0] * 1e3:8.3f}" if call else f"{'n/a':>8}"
        it = simulate_with(sc, True).iteration_time_s
        paper = shape.paper_selective_s if sel else shape.paper_full_s
        print(f"{label:<14} {ph['tasks']:>8,} {simulated:>7,} {ph['build'] * 1e3:>8.1f} "
              f"{ph['engine'] * 1e3:>8.1f} {ph['analysis'] * 1e3:>8.1f} {full * 1e3:>9.2f} "
              f"{folded * 1e3:>8.2f} {full / folded:>7.1f}x {la} {it:>7.2f} {paper:>7.2f}")
    print(f"slowest row folded: {slowest * 1e3:.1f} ms (target {TARGET_IN_PROCESS_MS:g} ms); "
          f"Calculon (issue 15's figure, not measured here): {CALCULON_IN_PROCESS_MS} ms per row in-process")
    print("\n# the 1T row with more micro-batches (global batch 512 -> 4,096; full recomputation)")
    one_t = SHAPES[-1]
    costs = {}
    for gb in (512, 4096):
        sc = from_dict(raw_row(one_t, False, gb))
        simulated, how = fold_stats(sc)
        costs[gb], n = timed(lambda sc=sc: simulate_with(sc, True), args.n, args.rounds, args.budget)
        print(f"{gb:>6,} micro-batches: {costs[gb] * 1e3:9.2f} ms folded (N={n}), "
              f"{simulated:,} tasks scheduled; {how}")
    print(f"ratio 4,096 / 512: {costs[4096] / costs[512]:.2f} (target <= 1.5)")

    # An installed package's modules are byte-compiled once (pip does it; Python caches them on first
    # import); an environment with PYTHONDONTWRITEBYTECODE set (this sandbox) would otherwise compile
    # every module at every start, about 0.1 s that neither a user nor Calculon's figure pays.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "explorer")], check=True)
    print(f"\n# whole processes: python -m explorer run ROW.json --json (median of {args.procs}), seconds; "
          "modules byte-compiled (python -m compileall explorer)")
    with tempfile.TemporaryDirectory() as tmp:
        for label, shape, sel in rows():
            t = explorer_process_s(raw_row(shape, sel), args.procs, Path(tmp))
            la = (f"{llm_analysis_process_s(shape, args.procs):.3f}"
                  if llm_analysis_call(shape, sel) and not sel else "")
            extra = f"   llm-analysis process {la} s" if la else ""
            ref = f"   Calculon {CALCULON_PROCESS_1T_S} s (issue 15's figure)" if shape.name == "1T" else ""
            print(f"{label:<14} {t:6.3f} s{extra}{ref}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"bare Python start-up for reference: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
