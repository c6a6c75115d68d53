"""Collective algorithms as data: one registry entry per algorithm with its pure cost function.

registry.py holds the entries; NCCL's kernels are link costs (nccl_links.py), MPI/Gloo's alpha-beta
models (alpha_beta.py), on the records they share (base.py).  A foundations-layer package: it
imports nothing else of explorer, so the config layer reads its choices and the network layer its
costs.
"""
