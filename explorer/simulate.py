"""Scenario -> timeline -> figures: the one entry point the CLI and the app call.

Data flows one way (DESIGN.md): workload, topology and placement give the task graph of one
iteration (taskgraph/builder.py), the engine schedules it, and the analysis modules turn the
scheduled tasks into a :class:`Result` — headline figures, breakdown, memory, traffic and the
timeline.  This module is the wiring.
"""
from __future__ import annotations

import math
import sys
import types
from collections.abc import Sequence

from .analysis.breakdown import CATEGORIES, COMM_DIMS
from .analysis.bubble import bubble_formula, bubble_summary, stage_passes
from .analysis.busiest import busiest_stage
from .analysis.link_bound import link_bound
from .analysis.measures import Measures
from .analysis.offload import offload_totals, with_offload
from .analysis.report import (
    WAN_EXPOSED_WARNING_SHARE,
    Notice,
    bottleneck,
    split_notice,
    wan_report,
    warnings_for,
    zero3_notice,
)
from .analysis.steady_state import ScheduledRun, schedule_iteration
from .config.generations import runs_fp8
from .engine.gc_pause import paused_collector
from .engine.scheduler import Task
from .fold import replica_choice
from .fold.run import run_iteration
from .fold.steady import FoldInfo
from .network.groups import Network
from .network.topology import BOUNDARY_NAMES
from .result.record import GPUClass, Result
from .scenario import Scenario
from .taskgraph.builder import IterationBuilder
from .variants.registry import wrapping

# Names other modules and tests import from here.
__all__ = ["GPUClass", "Notice", "Result", "ScheduledRun", "SimulationError", "WAN_EXPOSED_WARNING_SHARE",
           "bubble_formula", "schedule_iteration", "simulate", "stage_passes"]
_schedule = schedule_iteration         # the former private name, for scripts that used it


def simulate(sc: Scenario, fold: bool = True) -> Result:
    """Simulate one training iteration of ``sc`` (deterministic: same scenario, same result).

    With ``fold`` (the default) a long pipeline's steady state is folded (explorer/fold/steady.py): three
    small simulations prove the period, a fourth confirms it, and every figure is extrapolated, equal
    to the full simulation's to float rounding; the task list then unfolds only when read.  Where the period
    cannot be proven, and with ``fold=False``, every task is scheduled.  Replicas that differ
    (stragglers) are simulated once per kind and joined (explorer/variants/replicas.py).  With
    ``training.sync`` other than every-step, the inner step is simulated and the window of
    inner steps and their synchronisation is added (explorer/variants/lowcomm)."""
    with paused_collector():         # tens of thousands of live tasks: see explorer/engine/gc_pause.py
        return _simulate(sc, fold)


def _simulate(sc: Scenario, fold: bool) -> Result:
    """simulate() with the collector paused (see there)."""
    if sc.inference is not None:       # a serving scenario (issue 37): prefill and decode, not a step
        from .serving.result import simulate_serving
        return simulate_serving(sc)
    variant = wrapping(sc)
    if variant is not None:
        # Sync windows, failed nodes, gossip, replicas that differ (explorer/variants/registry.py):
        # the variant derives its inner scenario(s), simulates them here and combines.
        return variant.run(sc, lambda inner: _simulate(inner, fold))
    # stage_replicas auto: PipeDream's partitioner proposes, the simulation of its candidates decides
    sc = replica_choice.resolved(sc)
    it = run_iteration(sc, fold=fold)
    return assemble(sc, it.builder, it.net, it.measures, it.tasks, it.info)


def assemble(sc: Scenario, builder: IterationBuilder, net: Network, ms: Measures, tasks: Sequence[Task],
             fold_info: FoldInfo | None = None) -> Result:
    """The Result of ``sc`` from its per-class measures: maxima over classes, ratios and sentences.

    ``builder`` and ``net`` give what does not depend on the micro-batch count (classes, chunks,
    the layer split); the count is the scenario's own, whatever count ``builder`` was built for."""
    p = builder.p
    m = sc.micro_batches * sc.parallelism.token_slices        # pipeline units of one iteration
    # No link carries more than its capacity x the iteration (analysis/link_bound.py).
    bound = link_bound(ms.T, ms.link_load, ms.breakdowns, ms.traffic)
    T = bound.T
    par = sc.parallelism
    per_stage = par.tp * par.cp * sc.dp

    # GPU classes: one per pipeline stage.
    gpus_per_dc = sc.gpus // sc.cluster.datacenters
    classes = []
    for s in range(p):
        dc = net.placement.gpu(pp=s) // gpus_per_dc
        where = sc.cluster.datacenter_names[dc] if sc.cluster.datacenter_names else f"DC {dc}"
        name = f"stage {s}" + (f" · {where}" if sc.cluster.datacenters > 1 else "")
        lay = builder.layout              # the chunks this class holds (a V's two, interleaving's v)
        layers = tuple(builder.layer_counts[lay.chunk_index(s, c)] for c in range(lay.length // p))
        # PipeDream's per-stage replicas (taskgraph/replicas.py): stage s holds r_s of them.
        n = par.tp * par.cp * par.stage_replicas[s] if par.stage_replicas else per_stage
        classes.append(GPUClass(s, f"{name} (×{n} GPUs)", s, n, layers, dc, name))

    # Slowest class: the one with the most compute-stream work — the stage that bounds throughput
    # (ties, to a relative 1e-9: the one that finishes last, then the lowest index).
    slow = busiest_stage(ms.busy, ms.end)
    breakdown = bound.breakdowns[slow]
    # The Bubble card: the pipeline's idle share averaged over its GPUs (each stage's bubble
    # seconds from its own breakdown, weighted by the GPUs the stage holds — with PipeDream's
    # stage replicas a 15-1 split's 15 busy convolution GPUs outweigh the one FC GPU's idle time);
    # the busiest stage's is reported beside it.  Equal stages: the plain mean over stages.
    weights = [c.gpus for c in classes]
    idle = sum(b["bubble"] * w for b, w in zip(bound.breakdowns, weights, strict=True))
    bubble_mean = idle / sum(weights) / T
    formula, formula_text = bubble_formula(sc, builder, m)
    story = bubble_summary(sc, bubble_mean, breakdown["bubble"] / T, formula_text, p,
                           per_gpu=len(set(weights)) > 1)

    # Throughput and FLOPs: every GPU of a stage does that stage's per-GPU work.
    # (With PipeDream's stage replicas the stages' m units spread over sum(r) replicas, not p.)
    holders = sum(par.stage_replicas) if par.stage_replicas else p
    hw = sum(ch.hw_flops for ch in builder.chunks) * m / holders  # every chunk, m units, on p stages
    model = sum(ch.model_flops for ch in builder.chunks) * m / holders
    tokens = sc.training.global_batch * sc.model.seq_len
    peak = sc.hardware.gpu.peak_tflops * 1e12
    fp8_peak = (sc.hardware.gpu.fp8_tflops or sc.hardware.gpu.peak_tflops) * 1e12

    memory = max(ms.memory, key=lambda mb: mb.total)
    comm = {k: max([0.0, *(c[k] for c in ms.comm)]) for k in COMM_DIMS}
    traffic = {d: {tier: max([0.0, *(tr[d][i] for tr in ms.traffic)])
                   for i, tier in enumerate(BOUNDARY_NAMES)} for d in COMM_DIMS}
    links = ms.links
    # The host copies' stall on the busiest stage named "offload" (only when offloading).
    res_breakdown = with_offload({k: breakdown[k] for k in CATEGORIES},
                                 *offload_totals(builder, classes[slow].stage, m))
    notices = warnings_for(sc, memory, links, net, res_breakdown, T)
    moved = split_notice(builder.layer_counts, builder.balanced_counts)
    notices += (moved,) if moved else ()
    regather = zero3_notice(sc, comm["dp"], res_breakdown.get("dp", 0.0), T)
    notices += (regather,) if regather else ()
    notices += (bound.notice,) if bound.notice else ()
    result = Result(
        scenario=sc, iteration_time_s=T, tokens_per_s=tokens / T, tflops_per_gpu=hw / T / 1e12,
        # (an A100 runs an fp8 recipe in bf16: no FP8 peak to quote)
        mfu=model / T / peak, mfu_fp8_peak=model / T / fp8_peak if runs_fp8(sc) else None,
        bubble_fraction=bubble_mean, bubble_fraction_busiest=breakdown["bubble"] / T,
        bubble_formula=formula, bubble_formula_text=formula_text,
        bubble_explanation=story, breakdown_s=res_breakdown,
        breakdown_class=slow, memory=memory, memory_by_class=ms.memory, comm_bytes_per_gpu=comm,
        comm_bytes_by_tier=traffic,
        bottleneck=bottleneck(sc, res_breakdown, links, T, m, ms.pace_margin),
        warnings=tuple(n.message for n in notices),
        warning_kinds=tuple(n.kind for n in notices), classes=tuple(classes),
        stage_layers=builder.layer_counts, links=links,
        utilisation={k: v / T if T > 0 else 0.0 for k, v in ms.link_load.items() if isinstance(k, str)},
        tasks=tasks, fold=fold_info, wan_links=wan_report(net, ms.link_load, T))
    _check_finite(result)
    return result


class SimulationError(RuntimeError):
    """A simulated figure came out non-finite or non-positive: an internal error of the model (the
    scenario passed validation), reported as such rather than as Infinity or NaN in JSON."""


def _check_finite(r: Result) -> None:
    """Raise SimulationError unless every figure that leaves simulate() is finite, the iteration
    and throughputs positive and the shares non-negative."""
    positive = {"iteration_time_s": r.iteration_time_s, "tokens_per_s": r.tokens_per_s,
                "tflops_per_gpu": r.tflops_per_gpu, "mfu": r.mfu}
    finite = {"bubble_fraction": r.bubble_fraction, "bubble_fraction_busiest": r.bubble_fraction_busiest,
              "bubble_formula": r.bubble_formula, "memory total": r.memory.total,
              **{f"breakdown_s.{k}": v for k, v in r.breakdown_s.items()},
              **{f"comm_bytes_per_gpu.{k}": v for k, v in r.comm_bytes_per_gpu.items()},
              **{f"comm_bytes_by_tier.{d}.{k}": v
                 for d, t in r.comm_bytes_by_tier.items() for k, v in t.items()},
              **{f"tier_utilisation.{k}": v for k, v in r.utilisation.items()},
              **{f"wan_links.{w['a']}-{w['b']}": w["bytes_per_iteration"] for w in r.wan_links}}
    for name, x in positive.items():
        if not (math.isfinite(x) and x > 0):
            raise SimulationError(f"internal error: {name} = {x!r} for scenario {r.scenario.name!r} "
                                  f"(expected a finite positive number)")
    for name, x in finite.items():
        if not (math.isfinite(x) and x >= -1e-9 * max(1.0, abs(r.iteration_time_s))):
            raise SimulationError(f"internal error: {name} = {x!r} for scenario {r.scenario.name!r} "
                                  f"(expected a finite non-negative number)")


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`simulate`.

    ``explorer.simulate`` is the package's public function (explorer/__init__.py), but importing
    this submodule rebinds the package attribute of the same name to the module (Python's import
    system sets ``parent.child`` after loading).  Making the module itself callable keeps
    ``explorer.simulate(sc)`` working however many times, and in whatever order, either is used.
    """

    def __call__(self, sc: Scenario, fold: bool = True) -> Result:
        return simulate(sc, fold)


sys.modules[__name__].__class__ = _CallableModule
