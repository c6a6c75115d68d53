"""What one GPU does: its peaks by precision (hardware.py), the time of a kernel by shape and dtype
(kernels.py), and how training frameworks change what runs (frameworks.py)."""
