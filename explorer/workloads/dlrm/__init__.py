"""Recommendation models (DLRM, DCNv2): embedding tables sharded over the GPUs, dense layers data
parallel (explorer/workloads/dlrm/workload.py is what the registry reads)."""
