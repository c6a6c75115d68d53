"""Steady-state folds: a long pipeline's figures from a few short simulations, over tasks
(steady.py, tasks.py) or over arrays (arrays/), the micro-batch counts they simulate (plan.py) and
the work budget a simulation may take (budget.py)."""
