"""One published measurement next to the simulator's prediction, for the fidelity report.

``bench/calibrate.py`` prints every :class:`ReferenceRow` the reference modules produce
(training runs, collectives, GEMMs): the ``calibration`` rows are the ones default constants were
fitted to, the ``validation`` rows were sourced the same way and never fitted to.
"""
from __future__ import annotations

from dataclasses import dataclass

ROLES = ("calibration", "validation")


@dataclass(frozen=True)
class ReferenceRow:
    """A measured figure, what the simulator predicts for the same setup, and where it is from."""

    group: str          # the table it belongs to, e.g. "nccl-tests multi-node all-reduce"
    label: str          # the setup in a few words, e.g. "H100 2x8 all_reduce 64 MiB"
    measured: float
    predicted: float
    unit: str           # e.g. "GB/s busbw", "TFLOP/s per GPU"
    role: str           # one of ROLES
    source: str         # citation: paper/table, or URL of the posted output
    # Training runs: the regime key of the row's scenario (explorer/fidelity/band.py), None for the
    # other groups and for setups outside every regime.
    regime: tuple[str, ...] | None = None

    @property
    def error(self) -> float:
        """Relative error of the prediction, predicted / measured - 1."""
        return self.predicted / self.measured - 1


def summary(rows: list[ReferenceRow], role: str | None = None) -> tuple[float, float, int]:
    """(mean |error|, max |error|, count) over ``rows`` (of one ``role`` when given)."""
    errs = [abs(r.error) for r in rows if role is None or r.role == role]
    if not errs:
        return 0.0, 0.0, 0
    return sum(errs) / len(errs), max(errs), len(errs)
