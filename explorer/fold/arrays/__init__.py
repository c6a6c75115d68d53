"""The steady-state fold with its reduced runs evaluated as arrays (and the full count as one
array row where folding cannot pay), for pipelines of passes,
transfers, gradient buckets and optimizer steps (explorer/fold/steady.py does the same with task objects
for every other graph).

==========  ======================================================================================
rows        every task of a few reduced runs: ready, start, end, binding, from the compiled program
steps       the step loop: every pass's end and transfer's arrival, the engine's max and + in order
tail        each stage's gradient buckets on the dp stream and its optimizer step
walk        per-class breakdowns: busy parts, idle gaps explained along binding chains
proof       one run is the one before with one period inserted
traffic     bytes, tier load and main calls of the full iteration from transfer and bucket counts
fold        eligibility, the proofs, extrapolation to the scenario's count
direct      the array run: the full count as one row when folding cannot pay (no extrapolation)
unfold      the task list of the kept run with the proven period (fold_tasks.FoldedTasks)
lazy        the task list, made only when read
==========  ======================================================================================
"""
