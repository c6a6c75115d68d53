"""Stages after the engine: they read the scheduled tasks and the chunk descriptions (never the
builder's internals, never the network a second time) and turn them into figures.

- breakdown.py: where each GPU class's iteration goes (categories, idle time charged to its cause);
- steady_state.py: the iteration window of each schedule (flush, overlapping, asynchronous, P3);
- memory.py: per-GPU memory (ZeRO sharding, FSDP working set, activations at the order's peak);
- bubble.py: the schedule's bubble formula next to the simulated card, and their difference;
- report.py: bytes per dimension, the main call of each dimension, bottleneck and warnings.
"""
from .breakdown import (
                        CATEGORIES,
                        CATEGORY_OF_PART,
                        COMM_DIMS,
                        MemoryBreakdown,
                        class_breakdown,
                        group_by_class,
)

__all__ = ["CATEGORIES", "CATEGORY_OF_PART", "COMM_DIMS", "MemoryBreakdown", "class_breakdown",
           "group_by_class"]
