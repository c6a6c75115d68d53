"""Schedule generators: the order of work on each GPU class, and the task graph of one iteration."""
