"""Transformer layers: attention and MLP GEMMs by shape (attention.py, layer.py), the activations
each keeps (activations.py, activations_terms.py), how routed tokens land on expert ranks
(moe_load.py), and the family's registry functions (workload.py: its WorkloadSpec, PowerSGD
factor, names and sidebar controls)."""
