"""The estimator's pricing model: one configuration as arrays over its pipeline stages, priced by
the engine's own cost functions and its longest path (explorer/estimate groups and assembles rows;
explorer/fold/arrays folds a long pipeline over the same programs).

==============  ==================================================================================
keys            what each cost depends on (compute key, network key), interned; the shared network
stages          a network's stages grouped per dimension by where their groups sit (priced once)
chunk_basis     a chunk's work as chunk_work's pieces (one layer of each kind, each end) x counts,
                keyed by what chunk_work reads of the groups; the builder's layer split
buckets         gradient buckets and ZeRO 1-2 gathers as dp_buckets.dp_tasks makes them
profile         one row as arrays over stages: chunks, passes' parts, transfers, buckets, optimizer
program         a schedule's program order compiled once per shape into steps of ops
critical_path   the engine's longest path over a program, every stage and row of a step at once
                (groups of a sweep evaluated into one buffer)
pipeline        pass durations (SM contention, DualPipe's fused pairs) and a group's stage times
sync            FIFO bucket tails, optimizer, gathers; the iteration window of the registry entry
priority        P3 bucket priorities replayed on a priority queue (rare option, per row)
memory          per-GPU memory as analysis/memory.class_memory, the peak replayed as live counts
breakdown       the busiest stage's seconds per category
walk            its idle time split along binding dependencies, as the simulation's walk splits it
link_check      rows whose links might carry more than the iteration (left to the simulation)
split           the layer split of a pipeline as the builder makes it (taskgraph/split.py), per row
==============  ==================================================================================
"""
