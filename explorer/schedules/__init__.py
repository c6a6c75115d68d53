"""Pipeline schedules: one module per schedule with its program order (pure functions of stage,
p, m, v) and its formulas, and registry.py describing each one for the rest of the simulator."""
