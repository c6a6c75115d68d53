"""The whole run (issue 38): the scenario's phases simulated once each, their iterations and days,
failures and checkpoints (Young/Daly goodput), GPU-hours, energy and price.

- :mod:`.phases`      each phase's scenario (the base with its overrides) and its length;
- :mod:`.checkpoint`  the checkpoint's size and the seconds it costs to write and read;
- :mod:`.goodput`     the checkpoint interval and the expected goodput (Young 1974; Daly 2006);
- :mod:`.energy`      a phase's average GPU power and the run's energy (with the PUE);
- :mod:`.total`       the run total (run --json's ``run_total``) and its text table.
"""
