"""Scenarios that wrap the iteration: failed nodes (faults.py), replicas that differ (replicas.py:
stragglers; hetero.py: datacenters of different GPUs or sizes), and low-communication training
(lowcomm/: synchronisation windows, gossip and parameter servers)."""
