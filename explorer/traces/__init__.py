"""Measured runs beside the model: PyTorch profiler (Kineto) traces streamed (stream.py), read per
rank (load.py, classify.py), measured per category (measure.py) and compared with the simulation
(compare.py); nccl-tests output parsed (nccl_tests.py) and a fabric fitted to it (fabric_fit.py)."""
