"""Which route simulate() takes on issue 35's "other paths that do not fold", and what it costs.

Run: python bench/fold_paths.py [--n 20] [--rounds 3] [--budget 1.0] [--full]

The configurations, exactly as issue 35 names them:

- llama3-405b-16k's own layout (scenarios/llama3-405b-16k.yaml: TP 8, interleaved vpp 2, 16,384
  H100s) at pp 16, 32 and 64 (dp = 2048 / pp, so pp micro-batches per pipeline) with ZeRO 0, 1, 2;
- Korthikanti Table 5's 1T row (full recomputation, 1F1B, 512 micro-batches) as published (dp 1)
  and with dp 2 and ZeRO-1 (the nodes and the global batch doubled: 512 micro-batches per pipeline);
- DualPipe: scenarios/deepseek-v3.yaml as shipped;
- megatron-gpt3-175b's layout on ZB-H2, GPipe and 1F1B with ZeRO-3, DualPipe-V and Chimera.

Printed per configuration: the route taken — ``array fold`` (explorer/fold/arrays/fold.py), ``array
run`` (the whole iteration as one array run, explorer/fold/arrays/direct.py), ``task fold``
(explorer/fold/steady.py) or ``full`` (every task on the engine) — checked against the result
simulate() returned, why the faster routes were not taken, the first call's milliseconds in this
process (its program and builder not yet memoised; modules imported and shared programs compiled by
earlier configurations may be) and the median over ``--rounds`` rounds of the
mean of up to ``--n`` further calls (in-process, what an app or a sweep pays), the iteration time,
and with ``--full`` the unfolded simulation's milliseconds beside them.  The machine's load average
is printed at the start and the end: quote ratios measured in one run.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.fidelity.korthikanti import table5_raw, table5_rows  # noqa: E402
from explorer.fold.arrays.direct import attempt_array_run  # noqa: E402
from explorer.fold.arrays.fold import attempt_arrays  # noqa: E402
from explorer.fold.arrays.lazy import LazyTasks  # noqa: E402
from explorer.fold.plan import NotFolded  # noqa: E402
from explorer.scenario import Scenario, from_dict, load  # noqa: E402
from explorer.simulate import Result, simulate  # noqa: E402

ARRAY_FOLD, ARRAY_RUN, TASK_FOLD, FULL = "array fold", "array run", "task fold", "full"
TARGET_MS = 50.0            # issue 35: llama3-405b-16k at pp 64 and DualPipe at most 50 ms


def configurations() -> list[tuple[str, Scenario]]:
    """Every configuration the bench runs, named."""
    out = []
    for pp in (16, 32, 64):
        for zero in (0, 1, 2):
            sc = load(ROOT / "scenarios" / "llama3-405b-16k.yaml",
                      {"parallelism.pp": pp, "parallelism.dp": 2048 // pp, "parallelism.zero": zero})
            out.append((f"llama3-405b-16k pp {pp} ZeRO-{zero}", sc))
    one_t = next(r for r in table5_rows() if r.model == "1T" and r.recompute == "full")
    raw = table5_raw(one_t)
    out.append(("1T (Korthikanti, full) dp 1", from_dict(raw)))
    raw = copy.deepcopy(raw)
    raw["parallelism"].update(dp=2, zero=1)
    raw["cluster"]["nodes"] *= 2
    raw["training"]["global_batch"] *= 2
    out.append(("1T dp 2 ZeRO-1", from_dict(raw)))
    out.append(("deepseek-v3 (DualPipe)", load(ROOT / "scenarios" / "deepseek-v3.yaml")))
    # Item 1's other schedules on the 175B layout (pp 8 x tp 8, 96 micro-batches), 1F1B's order
    # otherwise: ZB-H2's overlapping window, ZeRO-3's drawn calls, Chimera's two directions (one
    # array run), and the fused F&B schedule the array runs do not hold yet (DualPipe-V).
    gpt3 = ROOT / "scenarios" / "megatron-gpt3-175b.yaml"
    for name, sets in (("ZB-H2", {"parallelism.schedule": "zb-h2"}),
                       ("GPipe ZeRO-3", {"parallelism.schedule": "gpipe", "parallelism.zero": 3}),
                       ("1F1B ZeRO-3", {"parallelism.schedule": "1f1b", "parallelism.zero": 3}),
                       ("DualPipe-V", {"parallelism.schedule": "dualpipe-v"}),
                       ("Chimera", {"parallelism.schedule": "chimera"})):
        out.append((f"gpt3-175b {name}", load(gpt3, {**sets, "parallelism.vpp": 1})))
    return out


def route(res: Result) -> str:
    """The route simulate() took, from the Result: fold info and a lazy task list say which."""
    lazy = isinstance(res.tasks, LazyTasks)
    if res.fold is not None:
        return ARRAY_FOLD if lazy else TASK_FOLD
    return ARRAY_RUN if lazy else FULL


def why_not(sc: Scenario, taken: str) -> list[str]:
    """Why the routes faster than ``taken`` were not taken (the attempts' own reasons)."""
    out = []
    if taken != ARRAY_FOLD:
        got = attempt_arrays(sc)
        assert isinstance(got, NotFolded), "the array fold would fold but was not taken"
        out.append(f"array fold not taken: {got.reason}")
    if taken in (TASK_FOLD, FULL):
        got = attempt_array_run(sc)
        assert isinstance(got, NotFolded), "one array run was possible but not taken"
        out.append(f"array run not taken: {got.reason}")
    return out


def timed(fn: Callable[[], object], n: int, rounds: int, budget_s: float) -> tuple[float, float, int]:
    """Seconds of the first call, then the median over ``rounds`` of the mean of N calls (N at most
    ``n``, fewer when a call is slow so that a round stays near ``budget_s``)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    n = max(1, min(n, int(budget_s / max(first, 1e-9))))
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    return first, statistics.median(per), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20, help="calls per round at most")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per round (about)")
    ap.add_argument("--full", action="store_true", help="also time the unfolded simulation")
    args = ap.parse_args()
    print(f"# issue 35's other paths; start: load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    head = f"{'configuration':<34} {'route':<10} {'first ms':>9} {'ms':>8} {'N':>3} {'T s':>8}"
    print(head + (f" {'full ms':>9}" if args.full else ""))
    for name, sc in configurations():
        t0 = time.perf_counter()
        res = simulate(sc)
        first = time.perf_counter() - t0
        taken = route(res)
        _, ms, n = timed(lambda sc=sc: simulate(sc), args.n, args.rounds, args.budget)
        line = (f"{name:<34} {taken:<10} {first * 1e3:9.1f} {ms * 1e3:8.1f} {n:>3} "
                f"{res.iteration_time_s:8.3f}")
        if args.full:
            _, full, _ = timed(lambda sc=sc: simulate(sc, fold=False), 1, 1, 0.0)
            line += f" {full * 1e3:9.1f}"
        print(line)
        for why in why_not(sc, taken):
            print(f"    {why}")
    print(f"# target: llama3-405b-16k pp 64 and DualPipe at most {TARGET_MS:g} ms in-process; end: load "
          f"average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
