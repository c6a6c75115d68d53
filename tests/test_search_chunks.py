"""How a search cuts its layouts into chunks (explorer/design/chunks.grouped, space.work_key)."""
from __future__ import annotations

from explorer.design.chunks import grouped
from explorer.design.space import Layout, work_key


def test_grouped_keeps_a_group_in_one_chunk_ranked_and_packs_short_runs():
    keys = [("b", 2), ("a", 9), ("b", 1), ("c", 0), ("a", 1), ("b", 0), ("a", 1), ("a", 0), ("c", 0)]
    parts = grouped(keys, 4)
    # Every position once; by group, inside a group by rank (ties: position): a a a a | b b b c c ->
    # runs of 4, then 3 and 2 packed while a chunk holds at most 4.
    assert sorted(i for p in parts for i in p) == list(range(len(keys)))
    assert parts == [[7, 4, 6, 1], [5, 2, 0], [3, 8]]


def test_grouped_cuts_a_long_run_into_the_fewest_even_pieces():
    parts = grouped([(0, 0)] * 10 + [(1, 0)] * 2, 4)
    # 10 of one group in 3 pieces of at most 4 (ceil(10/3) = 4: 4, 4, 2), the run of 2 packed after
    # the last piece, which then holds 4.
    assert [len(p) for p in parts] == [4, 4, 4]
    assert parts[-1] == [8, 9, 10, 11]
    assert all(len(p) <= 5 for p in grouped([(k % 3, k) for k in range(21)], 5))


def test_work_key_puts_deep_pipelines_first_and_names_count_shaped_schedules():
    lay = Layout(8, 16, 1, 1, 2, "interleaved", 1, 1, "none", True)
    # 16,384 GPUs / (8 x 16) = dp 128; 2,048 sequences / (128 x 1) = 16 micro-batches.
    assert work_key(lay, 16_384, 2_048) == ((-16, 16, ""), (8, 1, 1))
    v = Layout(8, 16, 1, 1, 1, "v-half", 1, 2, "none", True)
    assert work_key(v, 16_384, 2_048) == ((-16, 8, "v-half"), (8, 1, 2))    # its program serves 8 units only
    assert work_key(Layout(8, 3, 1, 1, 1, "1f1b", 1, 1, "none", True), 16_384, 2_048)[0][1] == 0
    deep = Layout(8, 64, 1, 1, 1, "1f1b", 1, 1, "none", True)
    assert min(work_key(lay, 16_384, 2_048), work_key(deep, 16_384, 2_048))[0][0] == -64
