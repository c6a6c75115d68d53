"""One module per technique the task graph models, each citing its paper: DP bucketing and P3
priorities, FSDP / ZeRO-3, TP collective matmul, ring attention (CP), MoE routing, the optimizer."""
