"""Bounds shared by several scenario fields (explorer/config/sections.py), kept apart so the
sections module stays one concept: the fields themselves."""
from __future__ import annotations

# Physical bounds shared by several fields (issue 8): every number lies in a range a real (or
# deliberately idealised) system can have, so a subnormal 5e-324 bandwidth or efficiency cannot
# reach the engine, where it would overflow to inf or divide by zero.
TFLOPS = {"min": 0.1, "max": 1e5, "why": "a B200 reaches 2,250 dense bf16 TFLOP/s; 0.1 to 100,000"}
SCALE_UP_GBPS = {"min": 0.01, "max": 1e6,
                 "why": "from a PCIe x1 lane (0.25 GB/s) to NVLink 5 (900 GB/s), up to 1e6 for an ideal link"}
LATENCY_US = {"min": 0, "max": 1e6, "why": "0 (idealised) to 1 s"}
# Model fields a model preset may supply instead of the user.
_FROM_PRESET = {"required": True, "hint": "or give model.preset"}
# hardware.power_cap_W (explorer/physics/power.py): the range of caps the DVFS fit was measured over.
POWER_CAP_W = {"min": 50, "max": 1e4,
               "why": "an H100 caps between 200 and 700 W, a GB200 GPU runs at 1,200 W",
               "doc": "GPU power limit (nvidia-smi -pl), W; default the board power (gpu.power_W); "
                      "below it compute-bound kernels run at a lower clock (physics/power.py)"}

# hardware.compute_efficiency (explorer/physics/hardware.py fits the default).
COMPUTE_EFFICIENCY = {"min": 0.01, "max": 1, "why": "a fraction of the peak: 1% to 100%",
                      "doc": "fraction of peak reached by large GEMMs; default fitted (hardware.py)"}
