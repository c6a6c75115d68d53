"""The run total as the CLI shows it: ``run_total`` in run --json, and a per-phase table plus totals
in the readable summary.  Both read the same RunTotal, computed once per simulated result."""
from __future__ import annotations

from collections.abc import Sequence

from ..config.schema import one_line
from ..result.record import Result
from ..workloads.registry import nouns
from .convergence import CITATION
from .phases import has_run
from .total import RunTotal, run_total

_LAST: list[tuple[Result, RunTotal | None]] = []     # the last result's run: JSON and text share it


def run_of(res: Result) -> RunTotal | None:
    """The run of ``res``'s scenario (None without phases or total_tokens), simulating each other
    phase once; remembered for the last result so the JSON and the text do not simulate twice."""
    if _LAST and _LAST[0][0] is res:
        return _LAST[0][1]
    from ..simulate import simulate  # deferred: validate and collective need no engine
    total = run_total(res.scenario, simulate, res) if has_run(res.scenario) else None
    _LAST[:] = [(res, total)]
    return total


def run_json(res: Result) -> dict:
    """``{"run_total": ...}`` when the scenario has a run plan, else ``{}`` (run --json merges it).
    A phase over memory also makes the run's ``memory_over_capacity`` true and adds its ``memory``
    warning (:func:`unfit_warnings`): the base scenario fitting does not make the plan runnable."""
    return total_json(run_of(res), res.warnings, res.warning_kinds)


def total_json(total: RunTotal | None, warnings: Sequence[str], kinds: Sequence[str]) -> dict:
    """:func:`run_json` of a run ``total`` whose base result warned ``warnings`` of ``kinds``."""
    if total is None:
        return {}
    out: dict = {"run_total": total.to_json_dict()}
    said = unfit_warnings(total)
    if said:
        out["memory_over_capacity"] = True
        out["warnings"] = [*warnings, *said]
        out["warning_kinds"] = [*kinds, *(["memory"] * len(said))]
    return out


def unfit_warnings(total: RunTotal) -> list[str]:
    """One ``memory`` warning per phase of the plan whose memory exceeds its GPU's."""
    return [f"memory: phase {one_line(p.name)!r} needs {p.memory_GB:.1f} GB per GPU of the "
            f"{p.memory_capacity_GB:.1f} GB its GPU has: the run plan cannot run as set (raise tp, pp or cp "
            f"in the phase's overrides, use ZeRO or activation recomputation)" for p in total.unfit]


def percent(x: float) -> str:
    """A share as a percentage with two decimals, or two significant digits below 0.01 % (a goodput
    of 2e-6 read "0.00%" beside a run of 27 million days)."""
    return f"{x * 100:.2g}%" if 0 < x < 1e-4 else f"{x:.2%}"


def _step(seconds: float) -> str:
    """A step's time: seconds with two decimals, or milliseconds below one second (a 3.6 ms DLRM
    step read "0.00s")."""
    return f"{seconds:.2f}s" if seconds >= 1 else f"{seconds * 1e3:.1f}ms"


def run_lines(res: Result) -> list[str]:
    """The per-phase table and the totals, for the readable summary; none without a run plan."""
    total = run_of(res)
    if total is None:
        return []
    # The family's unit (images, samples, seed nodes): total_tokens counts them (a hunt found an
    # "images/s" summary above a "tokens/s" table).
    unit = nouns(res.scenario.model).per_second
    lines = ["", "  run:", f"    {'phase':<20} {'GPUs':>7} {unit:>10} {'steps':>9} {'step':>9} "
                            f"{unit + '/s':>12} {'MFU':>6} {'goodput':>8} {'days':>8}"]
    for p in total.phases:
        name = one_line(p.name)[:20]
        lines.append(f"    {name:<20} {p.gpus:>7,} {p.tokens / 1e9:>9,.1f}B {p.iterations:>9,} "
                     f"{_step(p.iteration_s):>9} {p.tokens_per_s:>12,.0f} {p.mfu:>6.1%} "
                     f"{percent(p.goodput.goodput):>8} {p.days:>8.3f}")
    e = total.energy_MWh
    digits = 1 if total.days >= 10 else 3
    energy = f", {e:,.4g} MWh (PUE {total.pue:g})" if e is not None else ""
    price = f", price {total.price:,.0f}" if total.price is not None else ""
    lines.append(f"    total: {total.days:,.{digits}f} days, {total.gpu_hours:,.0f} GPU-hours, "
                 f"goodput {percent(total.goodput)}{energy}{price}")
    lines += [f"    warning: {w}" for w in unfit_warnings(total)]
    loss = total.loss
    if loss is not None:
        lines.append(f"    loss (estimate from the literature, {CITATION}, B_crit "
                     f"{loss.critical_batch_tokens / 1e6:,.4g}M tokens): the run's progress equals "
                     f"{loss.equivalent_tokens / 1e9:,.4g}B tokens at the small-batch limit "
                     f"(data efficiency {loss.data_efficiency:.1%}"
                     + (f"; DiLoCo's loss law x{loss.diloco_factor:.3g}" if loss.diloco else "") + ")")
    return lines
