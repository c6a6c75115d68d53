"""GPU power limit -> sustained SM clock -> compute rate (``hardware.power_cap_W``).

The board's power management lowers the SM clock until the draw fits the limit (NVIDIA, nvidia-smi
``-pl``/``--power-limit``; "clocks_event_reasons.sw_power_cap").  A compute-bound kernel's rate
scales with that clock; this module gives the clock as a fraction of the one the GPU's measured GEMM
rates were taken at (its board power ``GPU.power_W``).

Power at clock f, the CMOS relation P = P_static + C V^2 f with the voltage rising in proportion to
the clock over the DVFS range (so the dynamic part grows as f^3; Mei, Wang, Chu, "A Survey and
Measurement Study of GPU DVFS on Energy Conservation", Digital Communications and Networks 2017,
Sec. 2): a GEMM that draws the board power W at full clock draws

    P(f) = S*W + (1 - S)*W * (f / f_full)^3

so under a cap C < W it runs at f / f_full = ((C/W - S) / (1 - S))^(1/3).

S, the share of the board power that does not scale with the clock (leakage, HBM, I/O), is fitted
on two published pairs of the same FP8 GEMMs at two power limits (component measurements):
- H100 SXM: 1,141 TFLOP/s at 500 W (pytorch/FBGEMM pull request #2546, "H100 500W", fp8 row-wise
  GEMM only, 65536x3584x8192) against 1,402.6 at 700 W (ml-engineering MAMF table, H100 SXM fp8):
  ratio 0.814 at 500/700 -> S = 0.38;
- Blackwell: the same FP8 GEMMs (Llama 4 shapes) run ~2.0x an H100 on B200 held at 750 W and ~2.8x
  on GB200 at 1,200 W, the same die (pytorch/FBGEMM pull request #4172: "the advanced perf gain of
  GB200 vs. B200 is mainly derived from GPU cap power limit"): ratio 0.714 at 750/1200 -> S = 0.41.
Their mean, 0.40, is used (tests/test_power.py checks both pairs within 3 %).

Memory-bound kernels (element-wise, HBM streams) keep their rate: HBM runs on its own clock, and a
streaming kernel leaves the tensor cores idle and draws well below the board power, so a cap that
throttles GEMMs seldom binds it (Ujeniya et al., "Architectural Trade-offs in the Energy-Efficient
Era: a comparative study of power-capping NVIDIA H100 and H200", arXiv 2604.11391, 2026: the
memory-bound kernel loses far less than DGEMM as the cap falls).  Only GEMM and attention rates
(hardware.gemm_large_efficiency) carry the factor.

At the board power itself a Blackwell GPU does not sustain the clock of a short benchmark: kernels
run back to back for longer than a few milliseconds draw the board's 1,000 W and the firmware lowers
the SM clock.  Measured on B200 (flashinfer-ai/flashinfer pull request #2899, FA4 bf16 attention,
b=4 s=8192 h=16 d=128, 100 back-to-back iterations): SM clock 1,965 -> ~1,580 MHz and 1,450 ->
1,237 TFLOP/s once throttled.  The GEMM ceilings of gpus.yaml (MAMF: 150 calls of ~0.1 ms, well
inside that window) are burst rates; a training step's kernels, which run for seconds, reach
:data:`SUSTAINED_OVER_BURST` of them (:func:`sustained_fraction`).  The older generations have the
same mechanism in the vendor's own figures, at the clock they state for sustained tensor-core work
against the maximum SM clock a short burst runs at (B200's burst above ran at its maximum, 1,965 MHz):
- A100: NVIDIA computes its HPL Rpeak at "the clock that can be sustained at a GPU's power limit
  while running HPL", 1,305 MHz, against the A100's peak clock of 1,410 MHz (G. Lockwood, "Peak
  FLOPS", glennklockwood.com/garden/peak-FLOPS): 0.9255;
- Hopper (H100, H800 and H200 share the die and its clocks): the tensor-core peak is stated at
  1.83 GHz (989.4 TFLOP/s = 540,672 FLOP per clock x 1.83 GHz, same page), the FP32 peak at the
  maximum SM clock of 1,980 MHz (66.9 TFLOP/s = 33,792 FMA per clock x 2 x 1.98 GHz, Modal "GPU
  Glossary", peak rate; nvidia-smi reports max_sm_MHz 1980): 0.9242.
A compute-bound kernel's rate scales with the clock (above).  This replaces the in-training factor
hardware.GEMM_FRACTION_OF_MEASURED (0.92), which had been fitted to end-to-end training rows and
stood for this clock on the GPUs it was fitted on (A100 and H100).  A GPU with no figure
(GB300, a custom GPU) takes Hopper's ratio, within 0.2 % of Ampere's: a custom GPU is most often an
edited or renamed preset (the sidebar starts from h100-sxm), whose display name must not change its
physics (tests/test_controls.py, display fields).
"""
from __future__ import annotations

from ..config import GPU

# Share of the board power that does not scale with the SM clock (fitted above).
STATIC_POWER_SHARE = 0.40
# Dynamic power ~ V^2 f with V ~ f (Mei et al. 2017): P_dynamic ~ f^3.
DVFS_EXPONENT = 3.0
# Sustained over burst compute rate at the board power, by data-sheet name ("B200" also matches the
# GB200 superchip's GPU, the same die, whose rates gpus.yaml scales from B200's): flashinfer PR #2899,
# 1,237 / 1,450 TFLOP/s on B200; A100 1,305 / 1,410 MHz and Hopper 1,830 / 1,980 MHz (module docstring).
SUSTAINED_OVER_BURST = {"B200": 1237 / 1450, "A100": 1305 / 1410, "H100": 1830 / 1980,
                        "H800": 1830 / 1980, "H200": 1830 / 1980}
# A GPU without a figure: Hopper's clock ratio (module docstring).
DEFAULT_SUSTAINED_OVER_BURST = 1830 / 1980


def sustained_fraction(gpu: GPU) -> float:
    """Share of its benchmarked (burst) GEMM ceiling that ``gpu`` sustains over a training step at its
    board power: SUSTAINED_OVER_BURST for a known generation, else DEFAULT_SUSTAINED_OVER_BURST.
    Matched on the preset the GPU came from (``h100-sxm``, or a mapping ``based_on`` it: a renamed or
    re-powered preset keeps its physics), else
    on its data-sheet name (a custom GPU)."""
    label = (gpu.origin or gpu.name).upper()
    for key, frac in SUSTAINED_OVER_BURST.items():
        if key in label:
            return frac
    return DEFAULT_SUSTAINED_OVER_BURST


def clock_fraction(gpu: GPU, power_cap_W: float | None) -> float:
    """Sustained SM clock of a compute-bound kernel under ``power_cap_W`` as a fraction of the clock at
    the board power ``gpu.power_W`` (1 when no cap is set, the board power is unknown, or the cap is at
    or above it).  The config rule keeps caps above the static share (explorer/config/power_rules.py)."""
    if power_cap_W is None or not gpu.power_W or power_cap_W >= gpu.power_W:
        return 1.0
    share = power_cap_W / gpu.power_W
    # Never below the rule's floor (a cap of another GPU's board must not stop this one).
    dynamic = max(share - STATIC_POWER_SHARE, 1e-3)
    return (dynamic / (1.0 - STATIC_POWER_SHARE)) ** (1.0 / DVFS_EXPONENT)


def capped_rate_ratio(cap_W: float, board_W: float) -> float:
    """Compute-bound rate at ``cap_W`` over the rate at ``board_W`` (the relation above, by watts)."""
    return clock_fraction(GPU(name="", peak_tflops=1, memory_GB=1, hbm_GBps=1, power_W=board_W), cap_W)
