"""Workload families: what one GPU computes, keeps and communicates for each layer of a model.

One package per family (transformer/, convnet/), each turning a scenario into the typed
description the rest of the simulator reads (spec.py: :class:`~explorer.workloads.spec.WorkloadSpec`),
and one registry (registry.py) that says which family a scenario's model is and what it supports.
The records every family fills (spec.py, family.py) and the GEMM timer they share (timing.py)
sit beside the packages; outside this package only the registry and the records are imported."""
