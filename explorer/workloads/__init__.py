"""Workload families: what one GPU computes, keeps and communicates for each layer of a model.
One package per family (transformer/, convnet/)."""
