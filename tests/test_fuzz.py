"""Fuzzing the input boundary (issue 8): mutated scenario files, ``--set`` values and share links
each end in a valid scenario within the work budget or one one-line ScenarioError, quickly.

Hypothesis runs derandomized (a fixed sequence of examples) with a modest number of examples so
CI is deterministic and takes seconds; ``python bench/fuzz.py`` runs the same strategies for
thousands of examples and simulates the valid ones.  Only validation and the budget run here,
plus a full simulation of the first few valid scenarios of each test.
"""
from __future__ import annotations

import copy
import json
import math
import time
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.fold.admit import array_work
from explorer.fold.budget import MAX_WORK, estimate, folded_estimate
from explorer.runnable import replicas_estimate
from explorer.scenario import (
    SETTABLE,
    Scenario,
    ScenarioError,
    apply_overrides,
    from_dict,
    parse_assignments,
    parse_text,
)
from explorer.share import parse_query, preset_raw

from conftest import ROOT

SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
TEXTS = {name: (ROOT / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8") for name in SHIPPED}
KEYS = sorted(SETTABLE)
SECONDS_PER_EXAMPLE = 1.0      # validation + budget of one input (a simulation is budgeted apart)
CI = settings(max_examples=150, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Values a fuzzer (or an attacker) tries: extremes of every type.
NUMBERS = st.one_of(
    st.integers(min_value=-10**6, max_value=10**7),
    st.sampled_from([0, 1, 2, 3, 4, 8, 64, 1024, -1, 10**400, 2**63, 5e-324, 1e-320, -0.0, 1e308, 1e-9, 0.5,
                     float("inf"), float("nan")]),
    st.floats(allow_nan=True, allow_infinity=True),
)
WORDS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["1f1b", "interleaved", "zb-h2", "dualpipe", "pipedream-async", "h100-sxm", "b200",
                     "auto", "ring", "tp-cp-ep-dp-pp", "full", "fp8", "\x1b[31mred", "a\nb", "\u202egnp", "²",
                     "--5", "6,²,7,4", "1,2,3,4", "2024-99-99",
                     # Issue 32: text that is not UTF-8, raw and escaped, and YAML 1.1's number forms.
                     "\ud800", "a\udcff", '"\\ud800"', '"\\ud83d\\ude00"', "1:30", "030", "0b11", "0o17"]),
)
VALUES = st.recursive(st.one_of(NUMBERS, WORDS, st.booleans(), st.none()),
                      lambda inner: st.one_of(st.lists(inner, max_size=5),
                                              st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def in_range(key: str) -> st.SearchStrategy:
    """Values a field accepts on its own: its choices, or numbers within (and at the edges of)
    its physical bounds, so valid scenarios with extreme values reach the budget and the engine."""
    f = SETTABLE[key]
    meta, tp = f.metadata, str(f.type)
    if "choices" in meta:
        return st.sampled_from(meta["choices"])
    if tp.startswith("bool"):
        return st.booleans()
    low, high = meta.get("min", meta.get("gt", 0)), meta.get("max", 10**6)
    if tp.startswith("int"):
        return st.one_of(st.sampled_from([low, high, low + 1]), st.integers(low, min(high, low + 64)))
    if tp.startswith("float"):
        return st.one_of(st.sampled_from([low, high]), st.floats(low, high))
    return VALUES


FIELD_VALUES = st.sampled_from(KEYS).flatmap(lambda k: st.tuples(st.just(k), st.one_of(in_range(k), VALUES)))
# Text a YAML value may be made of: the hostile constructs of issue 8 and ordinary pieces.
FRAGMENTS = st.sampled_from([
    "!!int ", "!!bool ", "!!float ", "!!timestamp ", "!!python/object/apply:os.system ", "!x ", "&a ", "*a",
    "<<: ",
    "[", "]", "{", "}", ", ", ": ", "- ", "\n", "\n  ", "'", '"', "\\e", "#", "?", "|", ">", "%", "@", "`",
    "0", "1", "4", "8", "9" * 40, "1e-320", "5e-324", "1e400", ".inf", ".nan", "-", "--", "²", "٣", "0x1F",
    "1:30",
    "true", "maybe", "null", "~", "abc", "é", "\u2028", "\x00", "\x1b", "\t",
])
YAML_TEXT = st.lists(FRAGMENTS, max_size=12).map("".join)


def one_line(exc: ScenarioError) -> None:
    msg = str(exc)
    assert msg and "\n" not in msg and "\r" not in msg and "\x1b" not in msg, repr(msg)
    assert len(msg) < 2000, len(msg)
    msg.encode("utf-8")            # printable on a terminal and sendable to the page


_simulated: dict[str, int] = {}


SIMULATE_BELOW = 20_000        # work units of the scenarios simulated in CI (about 0.3 s each)


def over_budget(sc: Scenario) -> bool:
    """Beyond what config/budget admits: the full simulation unless the array runs hold it within
    MAX_WORK or its steady state folds into reduced simulations within MAX_WORK (a long pipeline
    of 42,514 sequences, say), or the kinds of replica that differ, together (each is simulated)."""
    folded = folded_estimate(sc)
    kinds = replicas_estimate(sc)
    array = array_work(sc)
    return (estimate(sc).work > MAX_WORK and (array is None or array > MAX_WORK)
            and (folded is None or folded.work > MAX_WORK)) or \
        (kinds is not None and kinds[0].work > MAX_WORK)


def valid(sc: Scenario | None, test: str) -> None:
    """A scenario that validates is within the budget; the first few small ones of each test also
    simulate to a finite result (all of them: bench/fuzz.py)."""
    if sc is None:
        return
    sc.name.encode("utf-8")        # a valid scenario's text can be printed and shown
    assert not over_budget(sc)
    if _simulated.get(test, 0) < 3 and estimate(sc).work < SIMULATE_BELOW:
        _simulated[test] = _simulated.get(test, 0) + 1
        from explorer.simulate import simulate
        res = simulate(sc)
        assert math.isfinite(res.iteration_time_s) and res.iteration_time_s > 0
        json.dumps(res.to_json_dict(), allow_nan=False)


def set_path(raw: dict, path: list[str], value: Any) -> None:
    node = raw
    for part in path[:-1]:
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


@st.composite
def mutated_files(draw) -> str:
    """A shipped scenario with some fields set to hostile values, unknown keys added, sections
    replaced, then (sometimes) hostile text spliced into the serialised file."""
    name = draw(st.sampled_from(SHIPPED))
    raw = yaml.safe_load(TEXTS[name])
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["field", "field", "field", "new-key", "section"]))
        if kind == "field":
            key, value = draw(FIELD_VALUES)
            set_path(raw, key.split("."), value)
        elif kind == "new-key":
            set_path(raw, [draw(st.sampled_from(list(raw))), draw(st.text(min_size=1, max_size=12))],
                     draw(VALUES))
        else:
            raw[draw(st.sampled_from(list(raw)))] = draw(VALUES)
    try:
        text = yaml.safe_dump(raw, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError, OverflowError):
        text = TEXTS[name]
    if draw(st.booleans()):
        lines = text.splitlines(keepends=True)
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(YAML_TEXT))
        text = "".join(lines)
    return text


def timed(check, *args) -> Scenario | None:
    """``check(*args)`` (validation only), which must take less than SECONDS_PER_EXAMPLE.  A slow
    run is timed once more and the faster counts: a loaded machine (CI's workers beside the browser
    tests) now and then pauses a process for a second, while a slow validation is slow both times."""
    start = time.perf_counter()
    sc = check(*args)
    took = time.perf_counter() - start
    if took >= SECONDS_PER_EXAMPLE:
        start = time.perf_counter()
        check(*args)
        took = min(took, time.perf_counter() - start)
    assert took < SECONDS_PER_EXAMPLE
    return sc


def check_file(text: str) -> Scenario | None:
    """The scenario a file gives, or None after checking its error is one line."""
    try:
        return from_dict(parse_text(text, "fuzz.yaml"))
    except ScenarioError as exc:
        one_line(exc)
        return None


def check_set(base: str, assignments: list[str]) -> Scenario | None:
    try:
        overrides = parse_assignments(assignments)
        return from_dict(apply_overrides(preset_raw(base), overrides))
    except ScenarioError as exc:
        one_line(exc)
        return None


def check_link(params: dict[str, str]) -> Scenario:
    """Whatever the link holds, it opens on a valid scenario, with one-line warnings."""
    view = parse_query(params)
    for w in view.warnings:
        assert "\n" not in w and "\x1b" not in w, repr(w)
        w.encode("utf-8")
    for v in view.design.values():
        v.encode("utf-8")
    return from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))


def _as_text(value: Any) -> str:
    """A value as a user types it after ``key=`` (lists in flow style, as share.format_value)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


HOSTILE_PAIRS = st.tuples(st.one_of(st.sampled_from(KEYS), st.text(max_size=20)),
                          YAML_TEXT | WORDS | NUMBERS.map(str))
PLAUSIBLE_PAIRS = st.sampled_from(KEYS).flatmap(lambda k: st.tuples(st.just(k), in_range(k).map(_as_text)))
ASSIGNMENTS = st.lists(st.one_of(HOSTILE_PAIRS, PLAUSIBLE_PAIRS).map(lambda kv: f"{kv[0]}={kv[1]}"),
                       min_size=1, max_size=4)
LINKS = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(KEYS + ["scenario", "view", "present"]), st.text(max_size=20)),
                    YAML_TEXT | WORDS | NUMBERS.map(str) | st.sampled_from(SHIPPED), max_size=6),
    st.tuples(st.sampled_from(SHIPPED), st.lists(PLAUSIBLE_PAIRS, max_size=5)).map(
        lambda t: {"scenario": t[0], **dict(t[1])}),
)


@CI
@given(mutated_files())
@pytest.mark.slow
def test_mutated_scenario_files_validate_or_fail_in_one_line(text):
    valid(timed(check_file, text), "file")


@CI
@given(st.sampled_from(SHIPPED), ASSIGNMENTS)
def test_set_values_validate_or_fail_in_one_line(base, assignments):
    valid(timed(check_set, base, assignments), "set")


@CI
@given(LINKS)
@pytest.mark.slow
def test_share_links_always_open_on_a_valid_scenario(params):
    valid(timed(check_link, params), "link")


def test_the_generators_reach_both_outcomes():
    """A fuzz run that only ever produced errors (or only valid scenarios) would test nothing:
    the same mutations must give both on the shipped files."""
    ok = from_dict(parse_text(TEXTS["teaching-8gpu"]))
    assert ok.parallelism.pp == 4
    raw = copy.deepcopy(yaml.safe_load(TEXTS["teaching-8gpu"]))
    set_path(raw, ["cluster", "scale_up", "bandwidth_GBps"], 5e-324)
    try:
        from_dict(parse_text(yaml.safe_dump(raw)))
    except ScenarioError as exc:
        one_line(exc)
    else:
        raise AssertionError("a subnormal bandwidth validated")
