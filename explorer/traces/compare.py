"""A measured iteration beside the scenario's simulated one: per category, exposed communication,
and the largest differences in words.

The simulated side is :func:`explorer.simulate.simulate`'s breakdown (the slowest GPU class, its
categories summing to the iteration: analysis/breakdown.py); the measured side is
:mod:`explorer.traces.measure`'s (the slowest rank of each step, summing to the step).  Both use
the explorer's categories, idle time being ``bubble`` on both sides.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..network.placement import Placement
from ..scenario import Scenario
from ..simulate import simulate
from ..vocabulary import CATEGORIES, COMM_DIMS
from .measure import Layout, Measured


def layout_of(sc: Scenario) -> Layout:
    """The scenario's rank layout (explorer/network/placement.py)."""
    pl = Placement.for_scenario(sc)
    return Layout(strides=dict(pl.strides), sizes=dict(pl.sizes))


@dataclass(frozen=True)
class Comparison:
    scenario: str
    measured: Measured
    simulated_iteration_s: float
    simulated: dict[str, float]

    @property
    def simulated_exposed_s(self) -> float:
        return sum(self.simulated.get(d, 0.0) for d in COMM_DIMS)

    def to_json(self) -> dict:
        m = self.measured
        return {
            "scenario": self.scenario,
            "iterations": len(m.steps),
            "steps": list(m.steps),
            "ranks": m.ranks,
            "measured_on": "gpu kernels" if m.gpu else "cpu ops",
            "iteration_time_s": {"measured": m.iteration_s, "simulated": self.simulated_iteration_s},
            "categories": {c: {"measured_s": m.categories[c], "simulated_s": self.simulated.get(c, 0.0)}
                           for c in CATEGORIES},
            "exposed_comm_s": {"measured": m.exposed_comm_s, "simulated": self.simulated_exposed_s},
            "comm_total_s": {"measured": m.comm_total_s},
            "per_step": [{"step": s.step, "rank": s.rank, "iteration_time_s": s.duration_s,
                          "categories": s.categories, "comm_total_s": s.comm_total_s} for s in m.per_step],
            "differences": self.differences(),
        }

    def differences(self, top: int = 3) -> list[str]:
        """The ``top`` categories whose measured and simulated shares of the iteration differ
        most, each as a sentence (shares, so a 10x faster cluster still reads sensibly)."""
        m = self.measured
        sim_t = self.simulated_iteration_s
        rows = []
        for c in CATEGORIES:
            ms = m.categories[c] / m.iteration_s if m.iteration_s > 0 else 0.0
            ss = self.simulated.get(c, 0.0) / sim_t if sim_t > 0 else 0.0
            if abs(ms - ss) >= 0.005:
                rows.append((abs(ms - ss), c, ms, ss))
        rows.sort(reverse=True)
        out = []
        for _, c, ms, ss in rows[:top]:
            name = (f"exposed {c} communication" if c in COMM_DIMS
                    else "idle time (bubble)" if c == "bubble" else c)
            out.append(f"{name} takes {ms:.0%} of the measured iteration, {ss:.0%} of the simulated one "
                       f"({m.categories[c] * 1e3:.2f} ms measured, {self.simulated.get(c, 0.0) * 1e3:.2f} ms "
                       "simulated)")
        return out


def compare(sc: Scenario, measured: Measured) -> Comparison:
    res = simulate(sc)
    return Comparison(scenario=sc.name, measured=measured, simulated_iteration_s=res.iteration_time_s,
                      simulated=dict(res.breakdown_s))


def comparison_text(c: Comparison) -> str:
    m = c.measured
    ms = lambda v: f"{v * 1e3:10.3f} ms"   # noqa: E731 - a local format
    lines = [f"# trace ({m.ranks} ranks, {len(m.steps)} iterations, measured on "
             f"{'GPU kernels' if m.gpu else 'CPU ops'}) vs scenario {c.scenario}",
             f"{'':22}{'measured':>13}{'simulated':>13}",
             f"{'iteration':22}{ms(m.iteration_s)}{ms(c.simulated_iteration_s)}",
             f"{'exposed communication':22}{ms(m.exposed_comm_s)}{ms(c.simulated_exposed_s)}"]
    for cat in CATEGORIES:
        a, b = m.categories[cat], c.simulated.get(cat, 0.0)
        if a or b:
            lines.append(f"  {cat:20}{ms(a)}{ms(b)}")
    diffs = c.differences()
    lines.append("largest differences:" if diffs
                 else "no category differs by more than 0.5 % of the iteration")
    lines += [f"  - {d}" for d in diffs]
    return "\n".join(lines)
