"""The schedule registry: one frozen description per pipeline schedule.

Everything outside ``explorer/schedules/`` asks this registry about a schedule (its order, whether
it splits the backward, how its iterations meet, its memory, bubble and validation rule) instead of
comparing schedule names.  Adding a schedule = one module with its order (and formulas) plus one
entry in ``SCHEDULES`` below.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import (
    chimera,
    cross_dc,
    crosspipe,
    dualpipe,
    dualpipe_v,
    pipedream,
    pipedream_2bw,
    pipeline,
    vshape,
    zero_bubble,
)
from .base import BubbleInputs, Op, Problem, ScenarioLike, Timing

OrderFn = Callable[[int, int, int, int], Sequence[Op]]          # (stage, p, units simulated, v) -> ops
TimedFn = Callable[[int, int, Timing], Sequence[Sequence[Op]]]  # (p, units simulated, timing) -> stages' ops
# (a schedule's order, activation bytes per chunk) -> peak bytes.  The order's element type is Any:
# each schedule's function reads the one op shape its own order makes (a ChunkOp, or DualPipe's
# DirectedOp | FusedOp), a pairing the registry's one field type cannot state.
PeakFn = Callable[[Sequence[Any], Sequence[float]], float]


class Window(Enum):
    """How one iteration is measured on the engine's timeline."""

    FLUSH = "flush"          # the pipeline drains before the optimizer: the iteration is the makespan
    OVERLAP = "overlap"      # the next iteration's warm-up overlaps this tail: max over stages of the span
    ASYNC = "async"          # never flushes: a steady-state period of m backwards in the second iteration


def _one_version(stage: int, p: int) -> int:
    return 1


class Placement(Enum):
    """Which pipeline stages a rank holds (explorer/taskgraph/layout.py reads it)."""

    INTERLEAVED = "interleaved"   # chunk c of rank r is stage c*p + r (Megatron-LM, SC21 Sec. 2.2)
    V = "v"                       # rank r holds stages r and 2p-1-r: the V's turn on rank p-1 is a
    #                               local hand-off and rank 0 holds both ends (Qi et al. 2024 Sec. 3)


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule.

    ``order(stage, p, units, v)`` is the program order of a stage; ``in_flight(stage, p, m, v)`` the
    micro-batches (chunk-micro-batches when interleaved) whose activations the stage holds at its
    peak — the memory estimate uses ``peak_activations(order, act_bytes_per_chunk)`` on the real
    order, of which ``in_flight`` is the unit-activation count.  ``bubble`` gives the closed form
    and its text; ``rule`` the schedule's own validation problem, if any.
    """

    name: str
    order: OrderFn
    split_backward: bool               # B (input gradients) and W (weight gradients) are separate passes
    window: Window
    iterations_simulated: int          # iterations run back to back in one task graph
    in_flight: Callable[[int, int, int, int], int]
    peak_activations: PeakFn
    bubble: Callable[[BubbleInputs], tuple[float, str]]
    rule: Callable[[ScenarioLike], Problem | None]
    virtual_stages: bool = False       # vpp > 1 allowed (chunks interleaved over the stages)
    two_directions: bool = False       # DualPipe, Chimera: rank r holds stage r and stage p-1-r
    # The layer split balances rank pairs of fused F&B ops (DualPipe: taskgraph/dualpipe_split.py,
    # which times the DualPipe order); otherwise chunks are balanced one by one (partition.py).
    pair_split: bool = False
    weight_versions: Callable[[int, int], int] = _one_version   # parameter copies per stage (stashing)
    citation: str = ""
    # More micro-batches insert one repeated period at one place of the timeline (explorer/fold/steady.py);
    # False for GPipe (all forwards, then all backwards: it grows in both phases).
    grows_in_one_place: bool = True
    # Orders that depend on the pipeline's costs and link delays (cross-datacenter schedules):
    # given them, ``timed`` replaces ``order``, which stays the order without any WAN.
    timed: TimedFn | None = None
    # Where the chunks sit: Megatron's interleaving (chunk c of rank r = stage c*p + r, one chunk per
    # rank unless virtual_stages) or a V of two chunks per rank (placement V: 2p stages on p ranks).
    placement: Placement = Placement.INTERLEAVED
    # DualPipe-style orders: fused F&B ops, and full backwards (B) beside split ones (Bz + W).
    fused_pairs: bool = False
    # The order's phases depend on the unit count as a whole (DualPipe's, ZB-V's reference builds
    # it for max(2p-1, m)): its order over more units, less the extra ones, is not its order, so
    # the estimator compiles it for the exact count (pricing/program.program_units).
    count_shaped: bool = False
    # PipeDream's 1F1B-RR: a stage's replicas take units round-robin, each in this order
    # (parallelism.stage_replicas; taskgraph/replicas.py builds the per-replica orders).
    stage_replicas: bool = False

    @property
    def overlapping(self) -> bool:
        """Consecutive iterations overlap (the metrics measure a steady-state period)."""
        return self.window is not Window.FLUSH

    @property
    def exact_units(self) -> bool:
        """Programs of this schedule serve exactly their unit count (no padding, no extrapolation)."""
        return self.two_directions or self.count_shaped

    @property
    def bucket_priority_ok(self) -> bool:
        """P3 bucket priorities (Jayarajan et al. SysML 2019) reorder the DP buckets the backward
        releases and let the next iteration start early: only on schedules that flush, with fused
        backwards or one chunk in each direction."""
        return self.window is Window.FLUSH and not self.two_directions and not self.fused_pairs

    def orders(self, p: int, units: int, v: int, timing: Callable[[], Timing]) -> list[Sequence[Op]]:
        """Every stage's program order over ``units``; ``timing`` is asked only by a timed schedule."""
        if self.timed is not None:
            return list(self.timed(p, units, timing()))
        return [self.order(s, p, units, v) for s in range(p)]

    def chunks_per_rank(self, v: int) -> int:
        """Model chunks one GPU holds: v virtual stages, or both ends for two directions or a V."""
        return 2 if self.two_directions or self.placement is Placement.V else v

    def validate(self, sc: ScenarioLike) -> Problem | None:
        """The schedule's own rule on ``sc`` (after the generic ones): (field, message) or None."""
        return self.rule(sc)


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("gpipe", pipeline.gpipe, False, Window.FLUSH, 1, pipeline.gpipe_in_flight,
             pipeline.peak_activations, pipeline.flush_bubble, pipeline.no_rule,
             citation="Huang et al., GPipe, NeurIPS 2019", grows_in_one_place=False),
    Schedule("1f1b", pipeline.one_f_one_b, False, Window.FLUSH, 1, pipeline.one_f_one_b_in_flight,
             pipeline.peak_activations, cross_dc.one_f_one_b_bubble, pipeline.no_rule,
             stage_replicas=True, citation="Narayanan et al., PipeDream-Flush, ICML 2021 / SC21"),
    Schedule("interleaved", pipeline.interleaved, False, Window.FLUSH, 1, pipeline.interleaved_in_flight,
             pipeline.peak_activations, pipeline.interleaved_bubble, pipeline.interleaved_rule,
             virtual_stages=True, citation="Narayanan et al., SC21 Sec. 2.2.2"),
    Schedule("zb-h1", zero_bubble.zb_h1, True, Window.FLUSH, 1, zero_bubble.zb_h1_in_flight,
             pipeline.peak_activations, zero_bubble.zb_h1_bubble, pipeline.no_rule,
             citation="Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024"),
    # ZB-H2's zero bubble needs the next iteration's warm-up to overlap this one's tail, which the
    # paper enables by replacing the optimizer's global synchronisation with post-validation (Sec. 4).
    Schedule("zb-h2", zero_bubble.zb_h2, True, Window.OVERLAP, 1, zero_bubble.zb_h2_in_flight,
             pipeline.peak_activations, zero_bubble.zb_h2_bubble, pipeline.no_rule,
             citation="Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024"),
    Schedule("dualpipe", dualpipe.dualpipe, True, Window.FLUSH, 1, dualpipe.in_flight,
             dualpipe.peak_activations, dualpipe.bubble, dualpipe.rule, two_directions=True, pair_split=True,
             fused_pairs=True,
             citation="DeepSeek-AI, DeepSeek-V3 Technical Report, 2024, Sec. 3.2.1"),
    Schedule("pipedream-async", pipedream.order, False, Window.ASYNC, pipedream.ITERATIONS_SIMULATED,
             pipeline.one_f_one_b_in_flight, pipeline.peak_activations, pipedream.bubble, pipedream.rule,
             weight_versions=pipedream.weight_versions, stage_replicas=True,
             citation="Narayanan et al., PipeDream, SOSP 2019"),
    # Cross-datacenter schedules (issue 12): their orders read the WAN delays (schedules/cross_dc.py).
    Schedule("1f1b-latency", pipeline.one_f_one_b, False, Window.FLUSH, 1, pipeline.one_f_one_b_in_flight,
             pipeline.peak_activations, cross_dc.latency_bubble, pipeline.no_rule,
             timed=cross_dc.latency_orders,
             citation="1F1B with extra warm-up over the WAN (CrossPipe, Chen et al., ATC 2025; GeoPipe)"),
    # The greedy order depends on the micro-batch count as a whole: no single inserted period.
    Schedule("crosspipe", pipeline.one_f_one_b, False, Window.FLUSH, 1, pipeline.one_f_one_b_in_flight,
             pipeline.peak_activations, cross_dc.latency_bubble, pipeline.no_rule,
             timed=crosspipe.orders, grows_in_one_place=False,
             citation="Chen et al., CrossPipe: Towards Optimal Pipeline Schedules for Cross-Datacenter "
                      "Training, ATC 2025"),
    # V-shaped schedules (issue 35): two chunks per rank placed as a V (schedules/vshape.py,
    # schedules/dualpipe_v.py); the loss is on rank 0.
    Schedule("zb-v", vshape.zb_v, True, Window.FLUSH, 1, vshape.in_flight(vshape.zb_v, vshape.zb_v_settled),
             pipeline.peak_activations, vshape.zb_v_bubble, vshape.rule, placement=Placement.V,
             count_shaped=True,
             citation="Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024 (V-ZB); "
                      "sail-sg/zero-bubble-pipeline-parallelism handcrafted ZB-V"),
    Schedule("v-half", vshape.v_half, True, Window.FLUSH, 1,
             vshape.in_flight(vshape.v_half, vshape.reordered_settled), pipeline.peak_activations,
             vshape.v_half_bubble, vshape.rule, placement=Placement.V,
             count_shaped=True,
             citation="Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024 (V-Half)"),
    Schedule("v-min", vshape.v_min, True, Window.FLUSH, 1,
             vshape.in_flight(vshape.v_min, vshape.reordered_settled), pipeline.peak_activations,
             vshape.v_min_bubble, vshape.rule, placement=Placement.V,
             count_shaped=True,
             citation="Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024 (V-Min)"),
    Schedule("dualpipe-v", dualpipe_v.dualpipe_v, True, Window.FLUSH, 1, dualpipe_v.in_flight,
             dualpipe.peak_activations, dualpipe_v.bubble, dualpipe_v.rule, placement=Placement.V,
             fused_pairs=True, count_shaped=True,
             citation="deepseek-ai/DualPipe, DualPipeV (Sea AI Lab's cut-in-half of DualPipe, DeepSeek-V3 "
                      "Technical Report Sec. 3.2.1)"),
    # Issue 35: Chimera's two pipelines reuse DualPipe's two lanes (rank r holds stage r of one and
    # p-1-r of the other: two weight replicas); PipeDream-2BW is PipeDream's asynchronous 1F1B with
    # two weight versions per stage.
    Schedule("chimera", chimera.chimera, False, Window.FLUSH, 1, chimera.in_flight,
             chimera.peak_activations, chimera.bubble, chimera.rule, two_directions=True,
             citation="Li & Hoefler, Chimera: Efficiently Training Large-Scale Neural Networks with "
                      "Bidirectional Pipelines, SC21"),
    Schedule("2bw", pipedream_2bw.order, False, Window.ASYNC, pipedream_2bw.ITERATIONS_SIMULATED,
             pipeline.one_f_one_b_in_flight, pipeline.peak_activations, pipedream_2bw.bubble,
             pipedream_2bw.rule, weight_versions=pipedream_2bw.weight_versions,
             citation="Narayanan et al., Memory-Efficient Pipeline-Parallel DNN Training "
                      "(PipeDream-2BW), ICML 2021"),
)}

ONE_F_ONE_B = "1f1b"            # PipeDream-Flush: the reference other schedules' warm-ups are compared with
DEFAULT = ONE_F_ONE_B
INTERLEAVED = "interleaved"     # Megatron-LM's schedule when a GPU holds several virtual stages


def megatron_schedule(vpp: int) -> str:
    """The schedule Megatron-LM runs for ``vpp`` virtual stages per GPU: 1F1B, interleaved above 1."""
    return INTERLEAVED if vpp > 1 else DEFAULT


def get(name: str) -> Schedule:
    """The registered schedule called ``name`` (ValueError listing the known ones otherwise)."""
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}") from None


def names() -> tuple[str, ...]:
    """Every registered schedule name, in registry order (the config layer's choices)."""
    return tuple(SCHEDULES)


def validate(sc: ScenarioLike) -> Problem | None:
    """The schedule-specific problem of ``sc`` (the config rules raise it as a ScenarioError), in the
    order the rules check: virtual stages without an interleaving schedule, the schedule's own
    rule, then an interleaving schedule with one virtual stage.  Assumes the generic rules (degrees,
    batch divisibility) have passed."""
    par = sc.parallelism
    sched = get(par.schedule)
    if par.vpp > 1 and not sched.virtual_stages:
        interleaving = ", ".join(s.name for s in SCHEDULES.values() if s.virtual_stages)
        return "parallelism.vpp", (f"{par.vpp} virtual stages need schedule: {interleaving} "
                                   f"(got {par.schedule}); set vpp: 1 or schedule: {interleaving}")
    problem = sched.validate(sc)
    if problem is None and sched.virtual_stages and par.vpp < 2:
        # One chunk per GPU is 1F1B's order with another name (SC21 Sec. 2.2.2: interleaving needs
        # v >= 2 model chunks per device); accepting it silently let users believe they interleave.
        return "parallelism.vpp", (f"{par.schedule} needs at least 2 virtual stages per GPU (got vpp "
                                   f"{par.vpp}); set vpp: 2 or more, or schedule: {DEFAULT} for one "
                                   "chunk per GPU")
    return problem


def priority_schedules() -> tuple[str, ...]:
    """Schedules on which P3 bucket priorities are allowed (communication.dp_priority)."""
    return tuple(s.name for s in SCHEDULES.values() if s.bucket_priority_ok)
