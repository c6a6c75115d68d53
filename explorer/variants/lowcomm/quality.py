"""What each low-communication technique's paper reports about model quality.

The simulator times an iteration; it does not train, so it cannot say whether H inner steps or a
4-bit outer gradient still converge.  Each note quotes the quality result of the technique's own
paper, shown next to the timing (CLI, JSON ``sync.quality``, the app) and never simulated.
"""
from __future__ import annotations

QUALITY: dict[str, str] = {
    "every-step": "synchronous data parallelism: the baseline the other kinds are measured against",
    "local-sgd": ("local SGD: Stich (ICLR 2019) proves it keeps the convergence rate of mini-batch SGD "
                  "with H times fewer synchronisations only while H stays small against the total number "
                  "of steps; Lin et al. (ICLR 2020) start it after a synchronous warm-up (post-local SGD) "
                  "to keep accuracy — not simulated here"),
    "diloco": ("DiLoCo: with 8 replicas and H = 500 inner steps it matches fully synchronous training "
               "on C4 while communicating 500 times less (Douillard et al. 2023, abstract and Sec. 3) "
               "— not simulated here"),
    "streaming-diloco": ("Streaming DiLoCo: fragments synchronised in turn, overlapped and in 4 bits reach "
                         "the quality of data-parallel training with about two orders of magnitude less "
                         "peak bandwidth (Douillard et al. 2025, abstract) — not simulated here"),
    "independent": ("c-BTM: expert language models trained apart on clusters of the data, never "
                    "synchronised and ensembled at inference, beat a dense model of the same training "
                    "budget in perplexity (Gururangan et al. 2023, Sec. 4) — not simulated here"),
}


def quality_note(kind: str) -> str:
    """The quality result reported for synchronisation ``kind`` (training.sync.kind)."""
    return QUALITY[kind]
