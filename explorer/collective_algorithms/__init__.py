"""Collective algorithms as data: one registry entry per algorithm (registry.py) with its pure cost
function — NCCL's kernels as link costs (nccl_links.py), MPI/Gloo's as alpha-beta models
(alpha_beta.py) — on the records they share (base.py).  A foundations-layer package: it imports
nothing else of explorer, so the config layer reads its choices and the network layer its costs."""
