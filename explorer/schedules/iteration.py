"""Moved to explorer.taskgraph (issue 9): builder.IterationBuilder, chunks, partition, techniques/.
This alias stays until tests/test_hardening.py imports ``explorer.taskgraph.builder``."""
from ..taskgraph.builder import IterationBuilder  # noqa: F401
