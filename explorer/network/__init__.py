"""The network: the three tiers as nested domains (topology.py), which GPUs form each group
(placement.py), the cost of a collective on them (collectives.py, pricing each algorithm of the
registry in explorer/collective_algorithms with NCCL's tuning model, nccl_tuning.py), the scale-up
wiring, the PCIe link, the WAN between datacenters (wan.py), gradient compression on the wire
(compression.py), and the scenario's groups priced on its fabric (groups.py)."""
