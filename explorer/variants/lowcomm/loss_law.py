"""DiLoCo's loss against data-parallel training, from its published scaling laws: an estimate from
the literature, shown next to the simulated time per step and never simulated.

Charles et al., "Communication-Efficient Language Model Training Scales Reliably and Robustly:
Scaling Laws for DiLoCo" (arXiv 2503.09799, 2025) trained decoder-only transformers of 35M to 2.4B
parameters on C4 for the Chinchilla-optimal D = 20 N tokens (Sec. 3.1), each algorithm at its own
best learning rate and batch, DiLoCo with H = 30 inner steps, and fitted the final evaluation loss
as a power law of the model size N for each number of replicas M (Table 7):

    L(N) = A N^alpha     data-parallel A = 18.129, alpha = -0.0953
                         DiLoCo M = 1: 18.363, -0.0961; M = 2: 18.768, -0.0969;
                         M = 4: 19.762, -0.0992;  M = 8: 21.051, -0.1018

and jointly L(N, M) = 19.226 N^-0.0985 M^0.0116 (Table 10).  The fits were checked by training 4B
and 10B models (Table 5: DiLoCo M = 2 at -0.18 % and -0.19 % of data-parallel's loss).

Here, for M replicas: the loss ratio L_M(N) / L_DP(N) (between the fitted M, geometric interpolation
in log M; beyond 8, the M = 8 fit times (M / 8)^0.0116, the joint fit's exponent), and what it costs
to reach data-parallel's loss. Along the compute-optimal frontier (D = 20 N, C = 6 N D = 120 N^2) a
loss L_M(N) is data-parallel's loss at the size N' = (L_M(N) / A_DP)^(1 / alpha_DP), so the same
loss takes (N / N')^2 times the compute (the tokens, at the same pace): the *compute ratio*, above 1
when DiLoCo is behind, below when it is ahead. A model outside the fitted and validated 35M-10B is
estimated at the nearer end of that range (the power laws' exponents differ, so extrapolating them
would let DiLoCo's advantage grow without bound), which the estimate says. What else lies outside
the fit is named on the estimate (``caveats``): H other than 30 (the paper finds the loss rises with
H from H = 5 on, less for larger models and for M = 1, Fig. 9, without a law), tokens per parameter other than
20 (its overtraining runs keep the ordering, Fig. 11), mixture-of-experts models (the fits are
dense).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SOURCE = "Charles et al. 2025 (arXiv 2503.09799), Table 7: L = A N^alpha per replica count, H = 30, D = 20 N"
DATA_PARALLEL = (18.129, -0.0953)
FITS: dict[int, tuple[float, float]] = {1: (18.363, -0.0961), 2: (18.768, -0.0969),
                                        4: (19.762, -0.0992), 8: (21.051, -0.1018)}
JOINT_M_EXPONENT = 0.0116          # Table 10's beta in L = A N^alpha M^beta
FIT_H = 30                         # the inner steps of every fitted run (Sec. 3)
FIT_TOKENS_PER_PARAM = 20.0        # Chinchilla-optimal D = 20 N (Sec. 3.1)
FIT_RANGE = (35e6, 10e9)           # fitted 35M-2.4B (Table 4), validated at 4B and 10B (Table 5)


@dataclass(frozen=True)
class DilocoLoss:
    """DiLoCo's loss against data-parallel training for one model and replica count (module
    docstring): the ratio of the fitted losses and the compute ratio to reach data-parallel's loss,
    with what of the scenario lies outside the fit."""

    params: float
    replicas: int
    inner_steps: int
    loss_ratio: float              # L_DiLoCo(N, M) / L_DP(N)
    compute_ratio: float           # compute (tokens) to reach data-parallel's loss, over data-parallel's
    caveats: tuple[str, ...]

    @property
    def relative_loss(self) -> float:
        """The loss above (+) or below (-) data-parallel's, as a fraction."""
        return self.loss_ratio - 1.0

    def sentence(self) -> str:
        """One line: the loss difference and what reaching data-parallel's loss takes."""
        r = self.compute_ratio
        later = (f"reaches data-parallel's loss with {r:.3g}x its tokens ({(r - 1):+.1%} at the same pace)"
                 if r >= 1 else f"reaches data-parallel's loss with {r:.3g}x its tokens ({(r - 1):+.1%}: "
                 "ahead of it)")
        extra = f"; {'; '.join(self.caveats)}" if self.caveats else ""
        return (f"DiLoCo with {self.replicas} replicas at {_size(self.params)} parameters: loss "
                f"{self.relative_loss:+.2%} against data-parallel training, {later} — an estimate from "
                f"{SOURCE}{extra}")

    @classmethod
    def from_json(cls, d: dict) -> DilocoLoss:
        """The estimate back from :meth:`to_json_dict` (the app and the CLI keep results as JSON)."""
        return cls(d["params"], d["replicas"], d["inner_steps"], d["loss_ratio"], d["compute_ratio"],
                   tuple(d["caveats"]))

    def to_json_dict(self) -> dict:
        return {"params": self.params, "replicas": self.replicas, "inner_steps": self.inner_steps,
                "loss_ratio": self.loss_ratio, "relative_loss": self.relative_loss,
                "compute_ratio": self.compute_ratio, "caveats": list(self.caveats), "source": SOURCE}


def _size(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def fitted_loss(params: float, replicas: int | None) -> float:
    """The fitted final loss at ``params`` parameters: data-parallel's for ``replicas`` None, else
    DiLoCo's with that many replicas (interpolated or extrapolated in M: module docstring), never
    below the fit of fewer replicas: every measured row rises with M (Tables 4 and 5), and where the
    independent fits cross (above about 5.5B, M = 4 below M = 2) the larger M keeps the smaller's."""
    if replicas is None:
        a, alpha = DATA_PARALLEL
        return a * params ** alpha
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    return max(_raw(params, m) for m in {replicas, *(k for k in FITS if k <= replicas)})


def _raw(params: float, replicas: int) -> float:
    """DiLoCo's loss from the fit of ``replicas`` or, between fits, their geometric interpolation in
    log M; beyond 8, the M = 8 fit times (M / 8)^beta of the joint fit."""
    if replicas in FITS:
        a, alpha = FITS[replicas]
        return a * params ** alpha
    if replicas > 8:
        return _raw(params, 8) * (replicas / 8) ** JOINT_M_EXPONENT
    lo = max(m for m in FITS if m < replicas)
    hi = min(m for m in FITS if m > replicas)
    t = math.log(replicas / lo) / math.log(hi / lo)
    return _raw(params, lo) ** (1 - t) * _raw(params, hi) ** t


def diloco_loss(params: float, replicas: int, inner_steps: int, tokens_per_param: float | None = None,
                moe: bool = False) -> DilocoLoss:
    """DiLoCo's estimate for ``params`` parameters and ``replicas`` replicas synchronising every
    ``inner_steps`` steps; ``tokens_per_param`` the run's tokens over its parameters when known."""
    lo, hi = FIT_RANGE
    n = min(max(params, lo), hi)          # held at the validated range's nearer end (docstring)
    ratio = fitted_loss(n, replicas) / fitted_loss(n, None)
    a, alpha = DATA_PARALLEL
    # The data-parallel size whose fitted loss equals DiLoCo's at ``n``: N' = (L / A)^(1/alpha).
    equal = (fitted_loss(n, replicas) / a) ** (1.0 / alpha)
    caveats = []
    if n != params:
        caveats.append(f"{_size(params)} parameters is outside the fitted and validated 35M-10B: "
                       f"estimated at {_size(n)}")
    if inner_steps != FIT_H:
        caveats.append(f"H = {inner_steps}, the law is at H = 30: the paper finds the loss rises with H "
                       "from H = 5 on, less for larger models (Fig. 9), without a fitted law")
    if tokens_per_param is not None and abs(tokens_per_param / FIT_TOKENS_PER_PARAM - 1) > 0.25:
        caveats.append(f"{tokens_per_param:.3g} tokens per parameter, the law is at 20 (overtrained runs "
                       "keep the ordering, Fig. 11)")
    if replicas > 8 or replicas not in FITS:
        caveats.append(f"M = {replicas} is between or beyond the fitted 1, 2, 4, 8 (interpolated)")
    if moe:
        caveats.append("fitted on dense models; a mixture of experts counts all its parameters here")
    return DilocoLoss(params, replicas, inner_steps, ratio, (n / equal) ** 2, tuple(caveats))
