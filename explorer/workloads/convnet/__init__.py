"""Residual convolutional networks: the layer table of ResNets (arch.py) and what each block
computes and keeps (blocks.py)."""
