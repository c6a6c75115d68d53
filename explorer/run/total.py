"""The whole run: every phase simulated once (phases with the same effective scenario share one
simulation), its iterations x its time per step, stretched by the expected goodput, and the sums:
days, GPU-hours, energy and price (run --json's ``run_total``)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config.schema import ScenarioError
from ..config.sections import Scenario
from ..network.compression_quality import convergence_cost
from ..result.record import Result
from . import energy
from .convergence import LossEstimate, loss_estimate
from .goodput import Goodput, goodput_of, running
from .phases import PhasePlan, plan

DAY_S = 86_400.0


@dataclass(frozen=True)
class PhaseTotal:
    """One phase of the run: its length, simulated step and the time, GPU-hours and energy it takes."""

    name: str
    gpus: int
    tokens: float
    iterations: int
    iteration_s: float           # time per step (the sync window's amortised step when windowed)
    tokens_per_s: float
    mfu: float
    exposed_comm_share: float    # exposed communication over the iteration (breakdown's GPU class)
    compute_s: float             # iterations x iteration time: failure-free training time
    goodput: Goodput
    avg_power_W: float | None
    batch_tokens: float = 0.0            # tokens per step (global batch x sequence length)
    critical_batch_tokens: float | None = None
    # Tokens to the uncompressed data-parallel run's loss over its tokens: DiLoCo's compute ratio
    # (variants/lowcomm/loss_law.py) times a compressor's measured extra steps; 1 otherwise.
    loss_compute_ratio: float = 1.0
    # The phase's memory per GPU against its GPU's (Result.binding_memory, GB) and the verdict its
    # run gives (a phase that raises seq_len can outgrow the GPU while the base scenario fits).
    memory_GB: float = 0.0
    memory_capacity_GB: float = float("inf")
    fits: bool = True
    # A GPU's draw while it does not compute (energy.average_W at u = 0: the static share) and whether
    # the job trains on through repairs (reliability.elastic): what failures' wall time draws.
    idle_power_W: float | None = None
    elastic: bool = False

    @property
    def wall_s(self) -> float:
        """Wall-clock seconds: the failure-free time over the goodput (inf if goodput is 0)."""
        g = self.goodput.goodput
        return self.compute_s / g if g > 0 else float("inf")

    @property
    def days(self) -> float:
        return self.wall_s / DAY_S

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.wall_s / 3600.0

    def energy_MWh(self, pue: float) -> float | None:
        """The phase's facility energy: its GPUs at the phase's average draw while they compute
        (training, and redoing the work a failure lost), at their idle draw while they write a
        checkpoint, restart or wait for a repair (energy.busy_share; a hunt found 35 days of waiting
        for repairs charged at the training draw, 2.3x the energy)."""
        w = self.avg_power_W
        if w is None:
            return None
        busy = energy.busy_share(self.goodput, self.elastic)
        idle = w if self.idle_power_W is None else self.idle_power_W
        wall = self.wall_s
        return energy.energy_MWh(w, self.gpus, wall * busy, pue) + energy.energy_MWh(idle, self.gpus,
                                                                                     wall * (1 - busy), pue)


@dataclass(frozen=True)
class RunTotal:
    """The run's phases and totals."""

    phases: tuple[PhaseTotal, ...]
    pue: float
    price_per_gpu_hour: float | None

    @property
    def days(self) -> float:
        return sum(p.days for p in self.phases)

    @property
    def unfit(self) -> tuple[PhaseTotal, ...]:
        """The phases whose memory exceeds their GPU's: the plan cannot run as set."""
        return tuple(p for p in self.phases if not p.fits)

    @property
    def gpu_hours(self) -> float:
        return sum(p.gpu_hours for p in self.phases)

    @property
    def compute_s(self) -> float:
        return sum(p.compute_s for p in self.phases)

    @property
    def goodput(self) -> float:
        """Failure-free training time over wall-clock time, over the whole run."""
        wall = sum(p.wall_s for p in self.phases)
        return self.compute_s / wall if wall > 0 else 0.0

    @property
    def energy_MWh(self) -> float | None:
        parts = [p.energy_MWh(self.pue) for p in self.phases]
        return None if any(x is None for x in parts) else sum(x for x in parts if x is not None)

    @property
    def price(self) -> float | None:
        return None if self.price_per_gpu_hour is None else self.price_per_gpu_hour * self.gpu_hours

    @property
    def loss(self) -> LossEstimate | None:
        """The run's progress in small-batch-equivalent tokens, when every phase has a critical
        batch (run/convergence.py: an estimate from the literature)."""
        return loss_estimate([(p.tokens, p.batch_tokens, p.critical_batch_tokens, p.loss_compute_ratio)
                              for p in self.phases])

    def to_json_dict(self) -> dict:
        """run --json's ``run_total`` (issue 38's contract keys first)."""
        return {
            "days": self.days, "gpu_hours": self.gpu_hours, "energy_MWh": self.energy_MWh,
            "goodput": self.goodput, "tokens": sum(p.tokens for p in self.phases),
            "fits": not self.unfit,
            **({"price": self.price} if self.price is not None else {}),
            **({"loss_estimate": self.loss.to_json_dict()} if self.loss is not None else {}),
            "phases": [{"name": p.name, "days": p.days, "tokens_per_s": p.tokens_per_s, "mfu": p.mfu,
                        "tokens": p.tokens, "iterations": p.iterations, "iteration_time_s": p.iteration_s,
                        "gpus": p.gpus, "gpu_hours": p.gpu_hours, "exposed_comm_share": p.exposed_comm_share,
                        "goodput": p.goodput.goodput, "loss_compute_ratio": p.loss_compute_ratio,
                        "checkpoint_interval_s": _finite(p.goodput.interval_s),
                        "job_mtbf_h": _finite(p.goodput.job_mtbf_s / 3600.0),
                        "repair_share": p.goodput.repair_share, "nodes_under_repair": p.goodput.nodes_down,
                        "energy_MWh": p.energy_MWh(self.pue), "memory_GB": p.memory_GB,
                        "memory_capacity_GB": _finite(p.memory_capacity_GB), "fits": p.fits}
                       for p in self.phases],
        }


def _finite(x: float) -> float | None:
    return None if x == float("inf") else x


COMM = ("tp", "cp", "ep", "pp", "dp", "emb", "gnn")


def phase_total(ph: PhasePlan, res: Result, survivors_share: float | None = None) -> PhaseTotal:
    """One phase's totals from its plan and its simulated iteration (``survivors_share``: the
    throughput an elastic job keeps without one node, run/goodput.py)."""
    sc = ph.scenario
    step = res.time_per_step_s
    u = energy.compute_share(res.breakdown_s, res.iteration_time_s)
    exposed = sum(res.breakdown_s.get(k, 0.0) for k in COMM) / res.iteration_time_s
    law = res.sync_window.loss if res.sync_window is not None else None
    # A compressor's measured extra steps (0 where its paper measured parity; unknown counts as 0,
    # which the run's compression line says): network/compression_quality.py.
    cc = convergence_cost(sc.communication.compression)
    extra = 1.0 + (cc.extra_steps or 0.0) if cc is not None else 1.0
    # Failed nodes are out of the job (variants/faults.py): they neither run, draw power nor count in
    # its GPU-hours; the survivors the dropped replicas leave idle are still held, so they do.
    held = sc.gpus - sc.cluster.faults.failed_nodes * sc.cluster.gpus_per_node
    mem, cap = res.binding_memory
    return PhaseTotal(ph.name, held, ph.tokens, ph.iterations, step, res.tokens_per_s, res.mfu, exposed,
                      ph.iterations * step, goodput_of(sc, survivors_share, step), energy.average_W(sc, u),
                      ph.tokens_per_iteration, sc.training.critical_batch_tokens,
                      extra * (1.0 if law is None else float(law["compute_ratio"])),
                      mem.total / 1e9, cap / 1e9, not res.memory_over_capacity,
                      energy.average_W(sc, 0.0), sc.reliability.elastic)


def run_total(sc: Scenario, simulate: Callable[[Scenario], Result],
              base: Result | None = None) -> RunTotal | None:
    """The run of ``sc`` (None without phases or total_tokens); ``simulate`` simulates one phase
    (the CLI passes explorer.simulate.simulate), ``base`` is the scenario's own result if simulated
    already (reused for phases without overrides)."""
    phases = plan(sc)
    if not phases:
        return None
    results: dict[str, Result] = {}
    if base is not None:
        results["base"] = base
    out = []
    for ph in phases:
        key = "base" if ph.scenario is sc else ph.key
        if key not in results:
            results[key] = simulate(ph.scenario)
        share = _survivors_share(ph.scenario, results[key], simulate)
        out.append(phase_total(ph, results[key], share))
        _check_repairs(ph.name, ph.scenario, out[-1].goodput)
        if out[-1].goodput.goodput <= 0:
            # Repairs alone cannot end here (a waiting job trains a share exp(-W / M) of the time):
            # the lost work and the restarts outpace the failures.
            g, given = out[-1].goodput, sc.reliability.checkpoint_interval_s
            if given is not None:
                # The user's interval, not the MTBF, is what fails (a hunt found 1 s and 1e8 s both
                # blamed on the MTBF); the optimum is Young/Daly's.
                raise ScenarioError("reliability.checkpoint_interval_s", f"phase {ph.name!r}: checkpoints "
                                    f"every {given:,.4g} s with failures every {g.job_mtbf_s:,.0f} s leave "
                                    "no training (goodput 0); leave it out for Young/Daly's interval")
            raise ScenarioError("reliability.mtbf_gpu_hours", f"phase {ph.name!r}: failures every "
                                f"{out[-1].goodput.job_mtbf_s:,.0f} s on {ph.scenario.gpus:,} GPUs outpace "
                                "checkpoints and restarts (goodput 0); raise the MTBF or the checkpoint "
                                "bandwidth")
    r = sc.reliability
    return RunTotal(tuple(out), r.pue, r.price_per_gpu_hour)


# A job able to train less than this share of the time while nodes are under repair is refused, not
# timed: its days are then more than a million times its training time, ~1e15 days at W / M = 32
# (a hunt's 100-hour repairs on 16,384 GPUs), numbers no plan is read from.
MIN_WHOLE_SHARE = 1e-6


def _check_repairs(name: str, sc: Scenario, g: Goodput) -> None:
    """A one-line error naming reliability.repair_h when repairs leave the job almost never able to
    train (:data:`MIN_WHOLE_SHARE`); run/goodput.py's module docstring gives the model."""
    if g.whole_share >= MIN_WHOLE_SHARE:
        return
    r = sc.reliability
    how = ("its survivors keep on average", "its throughput") if r.elastic else ("it is whole", "the time")
    fix = ("a shorter repair_h" if r.elastic else "reliability.elastic: true (train on the survivors) or a "
           "shorter repair_h")
    mtbf_h = g.job_mtbf_s / 3600
    raise ScenarioError("reliability.repair_h", f"phase {name!r}: repairs of {r.repair_h:,.4g} h with a "
                        f"failure every {mtbf_h:,.3g} h keep {g.nodes_down:,.3g} nodes down on average, so "
                        f"{how[0]} {g.whole_share:.1e} of {how[1]}; set {fix} (a repair time below the "
                        f"job's MTBF, {mtbf_h:,.3g} h)")


def _survivors_share(sc: Scenario, full: Result, simulate: Callable[[Scenario], Result]) -> float | None:
    """The throughput an elastic job keeps without one node: tokens/s of ``sc`` with one node failed
    (cluster.faults.failed_nodes + 1: its data-parallel replicas dropped, the others carrying the
    global batch; variants/faults.py) over ``full``'s; None unless the phase is elastic with a repair
    time.  A layout that cannot lose a node is a one-line error naming reliability.elastic."""
    r = sc.reliability
    if not (r.elastic and r.repair_h > 0 and r.mtbf_gpu_hours is not None):
        return None
    from ..config import from_dict
    from ..config.loading import to_dict
    # One more node of those the job runs on fails (goodput.running: not an idle one).
    raw = to_dict(running(sc))
    faults = dict(raw.get("cluster", {}).get("faults") or {})
    faults["failed_nodes"] = int(faults.get("failed_nodes", 0)) + 1
    raw = {**raw, "cluster": {**raw.get("cluster", {}), "faults": faults}}
    try:
        survivor = simulate(from_dict(raw))
    except ScenarioError as exc:
        raise ScenarioError("reliability.elastic", f"the job cannot continue without a node: {exc}") from None
    return min(survivor.tokens_per_s / full.tokens_per_s, 1.0) if full.tokens_per_s > 0 else 0.0
