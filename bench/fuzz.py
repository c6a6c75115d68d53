"""Long fuzz run of the input boundary (issue 8): the strategies of tests/test_fuzz.py, many more
examples, and every valid scenario simulated.

Run: python bench/fuzz.py [--examples 5000] [--seed 2026] [--no-simulate]

For each kind of input (mutated scenario files, ``--set`` assignments, share links) prints how
many inputs were tried, how many gave a valid scenario (and simulated to a finite result within
the time limit), how many were rejected with a one-line ScenarioError, and "other": anything
else — an exception of another type, a multi-line message or one that is not UTF-8 text, a
non-finite result or a slow example.  "other" must be 0; each one is listed with its input.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from explorer.fold.budget import estimate  # noqa: E402
from explorer.scenario import ScenarioError, apply_overrides, from_dict, parse_assignments, parse_text  # noqa: E402
from explorer.share import parse_query, preset_raw  # noqa: E402

from test_fuzz import ASSIGNMENTS, LINKS, SHIPPED, mutated_files, over_budget  # noqa: E402

VALIDATE_SECONDS = 1.0          # validation of one input
SIMULATE_SECONDS = 5.0          # one simulation of a valid scenario (the budget aims at 3-4 s)


def classify(build, simulate_valid: bool, other: list, given: object = None) -> str:
    """Run ``build()`` (input -> Scenario) and, if valid, simulate; return the outcome.  ``given``:
    the input, quoted (shortened) beside an exception it raised while validating."""
    start = time.perf_counter()
    try:
        sc = build()
    except ScenarioError as exc:
        msg = str(exc)
        took = time.perf_counter() - start
        if ("\n" in msg or "\r" in msg or "\x1b" in msg or not _utf8(msg)
                or (took > VALIDATE_SECONDS and _slow_again(build) > VALIDATE_SECONDS)):
            other.append(f"bad rejection ({took:.2f} s): {msg[:200]!r}")
            return "other"
        return "rejected"
    except Exception as exc:   # noqa: BLE001 - exactly what the fuzzer is looking for
        other.append(f"{type(exc).__name__}: {str(exc)[:200]!r} on {repr(given)[:300]}")
        return "other"
    if (time.perf_counter() - start > VALIDATE_SECONDS and _slow_again(build) > VALIDATE_SECONDS) \
            or over_budget(sc):
        other.append(f"slow or over budget validation: {sc.name!r}")
        return "other"
    if not _utf8(sc.name):
        other.append(f"a valid scenario whose name is not UTF-8: {sc.name!r}")
        return "other"
    if simulate_valid:
        from explorer.simulate import simulate
        start = time.perf_counter()
        try:
            res = simulate(sc)
            json.dumps(res.to_json_dict(), allow_nan=False)
            if not (math.isfinite(res.iteration_time_s) and res.iteration_time_s > 0):
                raise ValueError(f"iteration time {res.iteration_time_s}")
        except Exception as exc:   # noqa: BLE001
            other.append(f"simulate {type(exc).__name__}: {str(exc)[:200]!r} on {json.dumps(_brief(sc))}")
            return "other"
        took = time.perf_counter() - start
        if took > SIMULATE_SECONDS:
            other.append(f"simulate took {took:.1f} s (estimate {estimate(sc)})")
            return "other"
    return "valid"


def _slow_again(build) -> float:
    """Seconds of a second ``build()``: a validation over the limit counts as slow only when it is
    slow twice (a collection of the fuzzer's own garbage, or a busy machine, can stall one call:
    seeds 1205 and 9001 each reported a rejection of 1.3-1.7 s that takes 6 ms alone)."""
    start = time.perf_counter()
    try:
        build()
    except Exception:   # noqa: BLE001 - the first call's outcome is what is classified
        pass
    return time.perf_counter() - start


def _utf8(text: str) -> bool:
    """Whether ``text`` can be printed to a UTF-8 terminal or sent to the page (issue 32)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _brief(sc) -> dict:
    from explorer.scenario import to_dict
    d = to_dict(sc)
    d.pop("description", None)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=5000, help="inputs per kind")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--no-simulate", action="store_true", help="validate only")
    args = ap.parse_args()
    sim = not args.no_simulate
    cfg = settings(max_examples=args.examples, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))
    totals: Counter = Counter()
    for kind, strategy, build in [
        ("file", mutated_files(), lambda text: lambda: from_dict(parse_text(text, "fuzz.yaml"))),
        ("--set", st.tuples(st.sampled_from(SHIPPED), ASSIGNMENTS),
         lambda a: lambda: from_dict(apply_overrides(preset_raw(a[0]),
                                                     parse_assignments(a[1])))),
        ("link", LINKS, lambda params: lambda: _open_link(params)),
    ]:
        counts: Counter = Counter()
        other: list[str] = []

        @seed(args.seed)
        @cfg
        @given(strategy)
        def run(example):
            # run() is called once, right below, inside this iteration; defaults cannot bind the
            # loop variables because @given owns run's signature.
            counts["tried"] += 1  # noqa: B023
            counts[classify(build(example), sim, other, example)] += 1  # noqa: B023

        start = time.perf_counter()
        run()
        print(f"{kind:>6}: tried {counts['tried']:>6}  valid {counts['valid']:>6}  "
              f"rejected {counts['rejected']:>6}  "
              f"other {counts['other']:>3}  ({time.perf_counter() - start:.0f} s)")
        for line in other[:20]:
            print(f"        other: {line}")
        totals.update(counts)
    print(f" total: tried {totals['tried']:>6}  valid {totals['valid']:>6}  "
          f"rejected {totals['rejected']:>6}  "
          f"other {totals['other']:>3}")


def _open_link(params: dict):
    """A link never fails: it opens on a valid scenario; its warnings must be one line each."""
    view = parse_query(params)
    for w in [*view.warnings, *view.design.values()]:
        if "\n" in w or "\x1b" in w or not _utf8(w):
            raise AssertionError(f"multi-line or non-UTF-8 warning or setting {w[:100]!r}")
    return from_dict(apply_overrides(preset_raw(view.scenario), view.overrides))


if __name__ == "__main__":
    main()
