"""Transformer layers: attention and MLP GEMMs by shape (attention.py, layer.py), the activations
each keeps (activations.py, activations_terms.py) and how routed tokens land on expert ranks
(moe_load.py)."""
