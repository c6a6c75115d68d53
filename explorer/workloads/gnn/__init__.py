"""Graph neural network training (GraphSAGE): mini-batch with neighbour sampling, or full graph."""
