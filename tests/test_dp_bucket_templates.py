"""Gradient-bucket tasks made once per key and replayed (taskgraph/techniques/dp_buckets.py): every
replayed task must be the task made from scratch — duration, dependencies with their ready
fractions, P3 priority, payload, link calls (as distinct tuples: the traffic views count a shared
tuple once, scaled) — and the passes they overlap slowed alike."""
from __future__ import annotations

import pytest

from explorer.network.groups import Network
from explorer.scenario import load
from explorer.taskgraph.make import iteration_builder

from conftest import ROOT


class _Forgets(dict):
    """A template memo that never remembers: every call makes its tasks from scratch."""

    def get(self, key, default=None):
        return default


def _graph(sc, fresh: bool):
    net = Network(sc)
    if fresh:
        net._bucket_templates = _Forgets()
    return iteration_builder(sc, net, frozenset()).build()


def _fields(t):
    return (t.cls, t.stream, t.kind, t.duration, t.deps, t.priority, t.parts, t.info, t.links, t.tier, t.wire)


@pytest.mark.parametrize("name, over", [
    ("deepseek-v3", {}),                                                    # DualPipe: pair all-reduce
    ("deepseek-v3", {"parallelism.zero": 0}),
    ("megatron-gpt3-175b", {"communication.dp_priority": True, "communication.dp_overlap": True,
                            "parallelism.schedule": "interleaved", "parallelism.vpp": 2}),  # P3 by chunk
    ("megatron-gpt3-175b", {"communication.dp_overlap": False}),            # gathers after the step
    ("two-datacenters", {"communication.contention": True}),                # tier and wire kept
])
def test_replayed_bucket_tasks_are_the_tasks_made_from_scratch(name, over):
    sc = load(ROOT / "scenarios" / f"{name}.yaml", over)
    replayed, fresh = _graph(sc, False), _graph(sc, True)
    assert len(replayed.tasks) == len(fresh.tasks)
    buckets = 0
    for a, b in zip(replayed.tasks, fresh.tasks, strict=True):
        assert _fields(a) == _fields(b)
        if a.kind == "dp" and a.links:
            buckets += 1
            assert a.links is not b.links
    assert buckets > 0
    # No two bucket tasks share a links tuple (analysis/utilisation.class_calls counts shared ones once).
    ids = [id(t.links) for t in replayed.tasks if t.kind == "dp" and t.links]
    assert len(ids) == len(set(ids))


def test_p3_priorities_follow_the_chunk_when_replayed():
    """P3 (Jayarajan et al. 2019): a bucket's priority is 1 + chunk rank x 8 + its layer rank, so two
    chunks of equal size replayed from one template still get their own priorities."""
    sc = load(ROOT / "scenarios" / "megatron-gpt3-175b.yaml", {"communication.dp_priority": True,
              "communication.dp_overlap": True, "parallelism.schedule": "interleaved", "parallelism.vpp": 2})
    tasks = _graph(sc, False).tasks
    prio = {(t.cls, t.info.chunk, t.info.layer_rank): t.priority for t in tasks if t.kind == "dp"}
    assert len(set(prio.values())) > 8
    b = iteration_builder(sc, Network(sc), frozenset())
    for (s, c, rank), got in prio.items():
        assert got == 1 + b.layout.chunk_index(s, c) * 8 + rank
