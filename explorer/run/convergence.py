"""Time to a target loss, as far as the literature gives it: the critical batch size.

McCandlish et al., "An Empirical Model of Large-Batch Training" (arXiv 1812.06162, 2018, Sec. 2.2,
Eq. 2.11): to reach a given loss, the optimisation steps S and the training examples E at batch B
trade off as (S / S_min - 1)(E / E_min - 1) = 1, with S = S_min (1 + B_crit / B) and
E = E_min (1 + B / B_crit), where B_crit (their B_noise) is the critical batch and S_min, E_min the
least steps and data that loss can take.  A phase of T tokens at a batch of B tokens therefore
makes the progress T / (1 + B / B_crit) tokens would make at the small-batch limit: the run's
*small-batch-equivalent tokens* are the sum over its phases, the loss it reaches that of those
tokens, and two run plans reach the same loss when their equivalent tokens are equal.

A phase that trains with DiLoCo (``training.sync.kind`` diloco or streaming-diloco) makes its
progress divided by DiLoCo's compute ratio to data-parallel's loss (Charles et al. 2025, the
published scaling laws; explorer/variants/lowcomm/loss_law.py): above 1 it needs more tokens for
the same loss, below 1 fewer.  The two factors are taken as independent, a first order.

An estimate from the literature, labelled so wherever shown: B_crit is the user's
(``training.critical_batch_tokens``; it grows as the loss falls, Kaplan et al. 2020 Sec. 5.1, so a
single value is a first order), and nothing here models the optimiser or the learning-rate
schedule.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CITATION = "McCandlish et al. 2018, E = E_min (1 + B / B_crit)"
DILOCO_CITATION = "DiLoCo phases: Charles et al. 2025, Table 7 (explorer/variants/lowcomm/loss_law.py)"


def equivalent_tokens(tokens: float, batch_tokens: float, critical_tokens: float,
                      compute_ratio: float = 1.0) -> float:
    """Tokens at the small-batch limit that make the progress ``tokens`` make at ``batch_tokens``,
    with ``compute_ratio`` (DiLoCo's, 1 for data-parallel training) dividing them."""
    return tokens / (1.0 + batch_tokens / critical_tokens) / compute_ratio


@dataclass(frozen=True)
class LossEstimate:
    """The run's progress towards its loss in small-batch-equivalent tokens (module docstring)."""

    critical_batch_tokens: float
    tokens: float
    equivalent_tokens: float
    diloco: bool = False          # some phase's progress is scaled by DiLoCo's compute ratio
    # The equivalent tokens of the batch sizes alone (McCandlish's E_min over E), DiLoCo's ratio left
    # out: what the data efficiency is (None: the same as equivalent_tokens, no DiLoCo phase).
    batch_equivalent_tokens: float | None = None

    @property
    def data_efficiency(self) -> float:
        """Small-batch-equivalent tokens of the batch sizes over tokens trained, E_min / E: 1 at the
        small-batch limit, 1/2 at B = B_crit, never above 1.  DiLoCo's compute ratio, which can be
        below 1 (its law credits it with fewer tokens than data-parallel's for the loss), is
        :attr:`diloco_factor`, not part of it (a hunt found "data efficiency 103.5 %")."""
        eq = self.equivalent_tokens if self.batch_equivalent_tokens is None else self.batch_equivalent_tokens
        return eq / self.tokens if self.tokens > 0 else 0.0

    @property
    def diloco_factor(self) -> float:
        """The equivalent tokens over those of the batch sizes alone: 1 / DiLoCo's compute ratio,
        token-weighted over the phases (1 without DiLoCo)."""
        eq = self.batch_equivalent_tokens
        return self.equivalent_tokens / eq if eq else 1.0

    def to_json_dict(self) -> dict:
        return {"critical_batch_tokens": self.critical_batch_tokens,
                "equivalent_tokens": self.equivalent_tokens, "data_efficiency": self.data_efficiency,
                **({"diloco_factor": self.diloco_factor} if self.diloco else {}),
                "source": CITATION + ("; " + DILOCO_CITATION if self.diloco else "")}


def loss_estimate(phases: Sequence[tuple[float, float, float | None, float]]) -> LossEstimate | None:
    """From each phase's (tokens, batch tokens, critical batch tokens or None, DiLoCo's compute
    ratio or 1): the run's estimate, or None unless every phase has a critical batch."""
    if not phases or any(c is None for _, _, c, _ in phases):
        return None
    eq = sum(equivalent_tokens(t, b, c, r) for t, b, c, r in phases if c is not None)
    batch = sum(equivalent_tokens(t, b, c) for t, b, c, _ in phases if c is not None)
    return LossEstimate(float(phases[-1][2] or 0.0), sum(t for t, _, _, _ in phases), eq,
                        any(r != 1.0 for _, _, _, r in phases), batch)


def days_to_reach(days: float, own_equivalent: float, target_equivalent: float) -> float:
    """Days a run plan needs to make ``target_equivalent`` tokens of progress at its own average
    pace (``days`` for ``own_equivalent``): first order, the pace taken as even over the run."""
    return days * target_equivalent / own_equivalent if own_equivalent > 0 else float("inf")
