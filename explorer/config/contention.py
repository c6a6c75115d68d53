"""``communication.contention``: whether pipeline sends and data-parallel calls in flight on one
link share its bandwidth (explorer/engine/sharing.py).

Off by default: on the shipped scenarios it moves iteration times by at most +0.3 %
(llama3-405b-16k 7.143 -> 7.164 s), while the estimator and the array fold cannot replicate it yet
and hand every row where links may meet to the engine (bench/estimator.py's realistic grid: 751 ->
59 configurations/s), which would make the design space 13x slower for a sub-percent effect.  When
the fast paths replicate it (issue 35, schedules and speed), the default follows the physics.
"""

CONTENTION_DOC = ("pp and dp calls in flight on the same link share its bandwidth (max-min fair share); "
                  "off by default: at most +0.3 % on the shipped scenarios, and the fast estimator hands "
                  "such rows to the engine (explorer/config/contention.py)")
