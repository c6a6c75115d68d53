"""Published measurements next to the simulator's predictions: the reference rows as scenarios
(calibration.py), training runs (training.py), collectives (collectives.py), GEMM kernels
(kernels.py) and the report's row type (report.py)."""
