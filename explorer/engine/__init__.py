"""The deterministic list scheduler over a task DAG (scheduler.py), and pausing Python's cyclic
garbage collector while large task graphs are built (gc_pause.py)."""
