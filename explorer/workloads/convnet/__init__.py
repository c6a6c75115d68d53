"""Residual convolutional networks: the layer table of ResNets (arch.py), what each block
computes and keeps (blocks.py), and the family's registry functions (workload.py)."""
