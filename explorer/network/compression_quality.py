"""What each gradient compressor costs in convergence, as its paper measured it: an estimate from
the literature, shown beside the simulated time (CLI, run --json ``compression_convergence``, the
whole run's loss estimate) and never simulated.

Each entry is the extra optimisation steps the paper measured to reach the uncompressed run's
quality (0 where it reports the same quality in the same steps) and the conditions it was measured
under; outside them (e.g. a top-k share below the one validated) no figure is published and none
is given.  All of them keep an error-feedback residual or an equivalent correction, as the
simulator prices (explorer/network/compression.py):

- fp16: gradients all-reduced in fp16 with loss scaling reach fp32 training's accuracy in the same
  iterations on every network Micikevicius et al. trained ("Mixed Precision Training", ICLR 2018,
  Sec. 4);
- fp8 / int4 (ZeRO++ qgZ): block-quantised gradient reduction, training loss on par with the
  uncompressed baseline in the same steps for the GPT models it pre-trained (Wang et al.,
  "ZeRO++", ICLR 2024, convergence evaluation);
- 1bit (1-bit Adam): the same convergence speed as uncompressed Adam, samples to the same accuracy
  on BERT-Large pre-training, after a warm-up phase of plain Adam (Tang et al., ICML 2021,
  abstract and Sec. 6) — the warm-up's uncompressed steps are not timed here;
- topk: Deep Gradient Compression sends 0.1 % of the entries (with momentum correction, local
  clipping and a warm-up) without loss of accuracy on ImageNet, Penn Treebank and LibriSpeech
  (Lin et al., ICLR 2018, abstract and Sec. 5): shares of 0.001 and up;
- powersgd: low-rank factors with error feedback reach test performance on par with SGD in the
  same epochs, ResNet-18 on CIFAR-10 and an LSTM on WikiText-2 (Vogels et al., NeurIPS 2019,
  abstract and Sec. 5).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.compression import Compression


@dataclass(frozen=True)
class ConvergenceCost:
    """A compressor's measured convergence cost: ``extra_steps`` (fraction more steps to the
    uncompressed quality; None where no paper measured this setting), the conditions, the source."""

    kind: str
    extra_steps: float | None
    conditions: str
    source: str

    def sentence(self) -> str:
        """One line, labelled as an estimate from the literature."""
        if self.extra_steps is None:
            return (f"{self.kind}: no published convergence figure for this setting ({self.conditions}) — "
                    f"{self.source}")
        return (f"{self.kind}: {self.extra_steps:+.0%} steps to the uncompressed run's quality, as measured "
                f"with {self.conditions} — an estimate from {self.source}, not simulated")

    def to_json_dict(self) -> dict:
        return {"kind": self.kind, "extra_steps": self.extra_steps, "conditions": self.conditions,
                "source": self.source}


# kind -> (conditions measured, source)
MEASURED: dict[str, tuple[str, str]] = {
    "fp16": ("loss scaling, fp32 master weights", "Micikevicius et al., ICLR 2018, Sec. 4"),
    "fp8": ("block quantisation, GPT pre-training", "Wang et al. (ZeRO++), ICLR 2024"),
    "int4": ("block quantisation, GPT pre-training", "Wang et al. (ZeRO++), ICLR 2024"),
    "1bit": ("error compensation after a plain-Adam warm-up (not timed here), BERT-Large",
             "Tang et al. (1-bit Adam), ICML 2021, abstract"),
    "topk": ("momentum correction, local clipping and warm-up, shares of 0.001 and up",
             "Lin et al. (Deep Gradient Compression), ICLR 2018, abstract"),
    "powersgd": ("error feedback, ResNet-18 on CIFAR-10 and an LSTM on WikiText-2",
                 "Vogels et al. (PowerSGD), NeurIPS 2019, abstract"),
}
TOPK_VALIDATED_SHARE = 0.001      # DGC's 99.9 % sparsity


def convergence_cost(c: Compression) -> ConvergenceCost | None:
    """The measured convergence cost of compressor ``c``; None without compression."""
    if not c.active:
        return None
    conditions, source = MEASURED[c.kind]
    if c.kind == "topk" and c.ratio < TOPK_VALIDATED_SHARE:
        return ConvergenceCost(c.kind, None, f"ratio {c.ratio:g}; measured: {conditions}", source)
    return ConvergenceCost(c.kind, 0.0, conditions, source)
