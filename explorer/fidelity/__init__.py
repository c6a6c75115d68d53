"""Published measurements next to the simulator's predictions: the reference rows as scenarios
(calibration.py), training runs (training.py), collectives (collectives.py), GEMM kernels
(kernels.py), the report's row type (report.py) and Korthikanti et al. 2022 Table 5 on its
published layouts (korthikanti.py, timed by bench/korthikanti.py)."""
