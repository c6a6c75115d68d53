"""The memory replay reads a longer compiled program instead of compiling its own count
(pricing/program.serving_program, pricing/memory.live_counts)."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.pricing import memory, program
from explorer.schedules.registry import get


@pytest.mark.parametrize("name,p,v,units", [("1f1b", 4, 1, 8), ("interleaved", 4, 2, 12), ("zb-h1", 3, 1, 5)])
def test_live_counts_from_a_longer_cached_program_equal_its_own(name, p, v, units):
    sched = get(name)
    program.clear_programs()
    own = program.compile_program(name, p, v, program.program_units(sched, units, p))
    mine = np.flatnonzero(own.mb < units)
    mine = mine[np.argsort(own.stage[mine], kind="stable")]
    expected = memory._stage_counts(own, sched.fused_pairs, mine, p)
    program.clear_programs()
    memory._LIVE.clear()
    program.compile_program(name, p, v, 64)            # a sweep's longest row compiled it first
    got = memory.live_counts(sched, p, units, v)
    # No program compiled for the short count: the 64-unit one serves it ...
    assert list(program._PROGRAMS) == [(name, p, v, 64)]
    # ... and its first `units` units replay to the same live vectors, element for element.
    np.testing.assert_array_equal(got, expected)


def test_count_shaped_schedules_compile_their_own_count():
    sched = get("v-half")
    program.clear_programs()
    program.compile_program("v-half", 4, 1, 16)
    assert program.serving_program(sched, 4, 1, 8).units == 8       # its order depends on the count
    assert ("v-half", 4, 1, 8) in program._PROGRAMS
