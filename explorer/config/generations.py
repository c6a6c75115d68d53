"""A GPU's architecture generation, read from its model number.

The presets carry no architecture field, and a custom GPU is a mapping of figures with a display
name, so what a GPU can run — TF32 and bf16 tensor cores (Ampere and later), FlashAttention-2
(Ampere and later: flash-attn refuses sm_70 and sm_75), FlashAttention-3 (Hopper), NCCL's tuning
tables (Volta, Ampere, Hopper, Blackwell) — is decided by the model number in the name of its
origin preset (``hardware.gpu.based_on``: a renamed preset keeps its architecture) or its own:
V100 (Volta, compute capability 7.0), T4 and the RTX 20 series (Turing, 7.5), A100/A10/A800/RTX
A6000 and the RTX 30 series (Ampere, 8.0/8.6), L4/L40/L40S and the RTX 40 series (Ada, 8.9),
H100/H800/H200/H20/GH200 (Hopper, 9.0), B200/GB200/B300/GB300 (Blackwell, 10.x), as NVIDIA names
them — anywhere in the name ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2").
An unknown name gives None: the callers then fall back on the GPU's figures (an FP8 rate above
the bf16 peak: Hopper or later).
"""
from __future__ import annotations

import re

from .presets import gpu_presets
from .sections import GPU, Scenario

# NVIDIA's model numbers by generation, whole (not a prefix of a longer number, not inside a word:
# "TPU v5p" or "GPT4" name no NVIDIA GPU), any case, first match wins.
_MODEL_NUMBERS = (
    (r"V100", "volta"),
    (r"T4|RTX ?20[5-9]0|QUADRO RTX ?[4-8]000|TITAN RTX", "turing"),
    (r"A100|A10G?|A30|A40|A800|RTX A[4-6]000|RTX ?30[5-9]0", "ampere"),
    (r"L4|L20|L40S?|RTX ?40[6-9]0|RTX 6000 ADA", "ada"),
    (r"G?H100|G?H200|H800|H20", "hopper"),
    (r"G?B100|G?B200|G?B300|RTX ?50[6-9]0", "blackwell"),
)
_MODELS = tuple((re.compile(rf"(?<![A-Z0-9])(?:{pattern})(?![0-9])", re.IGNORECASE), gen)
                for pattern, gen in _MODEL_NUMBERS)
# Generations without bf16 or TF32 tensor cores and without FlashAttention-2 (sm < 80).
PRE_AMPERE = ("volta", "turing")
# The four families measured tables are kept by (NCCL's tuning tables by compute capability,
# tuning.cc; the attention kernels' fractions of peak): Turing with Volta, Ada with Ampere.
_FAMILY = {"turing": "volta", "ada": "ampere"}


def family(arch: str) -> str:
    """The measured tables' family of generation ``arch`` (volta, ampere, hopper or blackwell).

    >>> family("turing"), family("ada"), family("hopper")
    ('volta', 'ampere', 'hopper')
    """
    return _FAMILY.get(arch, arch)


def architecture_of_name(name: str) -> str | None:
    """The generation a GPU display name's model number names, or None.

    >>> architecture_of_name("Tesla V100-SXM2-32GB"), architecture_of_name("NVIDIA H100 80GB HBM3")
    ('volta', 'hopper')
    >>> architecture_of_name("L40S"), architecture_of_name("A10G 24GB"), architecture_of_name("GB200 NVL72")
    ('ada', 'ampere', 'blackwell')
    >>> [architecture_of_name(n) for n in ("my accelerator", "TPU v5p", "Accelerator v2", "GPT4 box")]
    [None, None, None, None]
    >>> architecture_of_name("GeForce RTX 2080 Ti"), architecture_of_name("RTX 6000 Ada")
    ('turing', 'ada')
    """
    return next((gen for pattern, gen in _MODELS if pattern.search(name or "")), None)


def architecture(gpu: GPU) -> str | None:
    """The generation of ``gpu``: its origin preset's name when it has one, else its own name's
    (module docstring); None when neither names a known model."""
    origin = gpu.origin
    if origin is not None and origin in gpu_presets():
        got = architecture_of_name(str(gpu_presets()[origin].get("name") or ""))
        if got is not None:
            return got
    return architecture_of_name(gpu.name)


def runs_fp8(sc: Scenario) -> bool:
    """Whether ``sc``'s linear layers run in FP8: ``training.dtype`` fp8 on a GPU with FP8 tensor
    cores, which it shows by an fp8 peak above its bf16 one (Transformer Engine needs compute
    capability 8.9+).  On one without (an A100) the FP8 recipe runs in bf16 — its GEMMs, and its
    memory too: no FP8 activations or weight copies (a hunt found an A100 fp8 run priced in bf16
    keeping FP8's smaller activations, 2.9 against 3.4 GB)."""
    g = sc.hardware.gpu
    return sc.training.dtype == "fp8" and fp8_cores(g.fp8_tflops, g.peak_tflops)


def fp8_cores(fp8_tflops: float | None, peak_tflops: float) -> bool:
    """Whether a GPU has FP8 tensor cores: an fp8 peak above its bf16 one (:func:`runs_fp8`)."""
    return (fp8_tflops or 0) > peak_tflops
