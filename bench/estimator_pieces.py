"""Where the estimator's first call goes: inclusive seconds of each kind of piece it prices.

Run: python bench/estimator_pieces.py [--grid realistic|deep] [--rounds 5]

Each round is a new Python process that builds the grid's rows (as bench/estimator.py does:
``from_dict`` per row), wraps the estimator's pricing functions with timers, and calls
``estimate_many`` twice: the first call prices every distinct layer split, bucket set, network,
program and memory shape once; the second finds them memoised, so what remains is the per-row
floor (keys, lookups, the step-by-step evaluation, breakdowns).  Printed per piece: calls and the
median over rounds of its inclusive milliseconds in each call (pieces nest: dp_work includes
the NCCL pricing ``_best_nccl``; the pieces do not add up to the total).  The wrappers cost about
a microsecond per call, so totals read a few percent above an unwrapped run (bench/estimator.py).
"""
from __future__ import annotations

import argparse
import collections
import importlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# (module, function, class or None): the pricing of each kind of distinct piece, then the rest.
PIECES = [
    ("explorer.estimate.many", "row_profile", None),            # every row's pieces, looked up or priced
    ("explorer.estimate.fast", "estimate_profiles", None),      # evaluating, memory, breakdowns
    ("explorer.pricing.stages", "netinfo", None),              # a network key's stage classes
    ("explorer.pricing.profile", "layer_split", None),         # the builder's layer split
    ("explorer.pricing.split", "start_splits", None),          # ... its search (taskgraph/split.py)
    ("explorer.pricing.profile", "stage_classes", None),
    ("explorer.pricing.profile", "basis", None),               # chunk pieces per stage class
    ("explorer.pricing.profile", "_layout", None),
    ("explorer.pricing.profile", "transfers", None),           # pp send/recv per stage pair
    ("explorer.pricing.profile", "dp_work", None),             # gradient buckets and gathers
    ("explorer.network.collectives", "_best_nccl", None),               # NCCL's algorithm x protocol pick
    ("explorer.network.topology", "per_domain", "Fabric"),              # group members per domain
    ("explorer.estimate.many", "_run", None),                   # evaluating the pipelines
    ("explorer.pricing.pipeline", "compile_program", None),    # ... compiling their programs
    ("explorer.pricing.pipeline", "evaluate", None),           # ... stepping through them
    ("explorer.estimate.many", "memory_totals", None),          # per-GPU memory peaks
    ("explorer.estimate.many", "breakdowns", None),
    ("explorer.estimate.many", "ending", None),                 # the step's synchronisation
]


def _wrap(table: dict, counts: collections.Counter, module: str, name: str, owner: str | None) -> None:
    mod = importlib.import_module(module)
    obj = mod if owner is None else getattr(mod, owner)
    fn = getattr(obj, name)

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            table[name] += time.perf_counter() - t
            counts[name] += 1

    setattr(obj, name, timed)


def child(grid: str) -> None:
    """In a fresh process: per piece, (calls, seconds) in the first and the memoised call."""
    spent: dict = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    for module, name, owner in PIECES:
        _wrap(spent, calls, module, name, owner)
    from estimator import GRIDS, valid_rows

    from explorer.estimate import estimate_many
    rows = valid_rows(GRIDS[grid])
    out = {"rows": len(rows)}
    for label in ("first", "memoised"):
        spent.clear()
        calls.clear()
        t = time.perf_counter()
        estimate_many(rows)
        total = time.perf_counter() - t
        out[label] = {"total": total, "pieces": {k: [calls[k], v] for k, v in spent.items()}}
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default="realistic", choices=("realistic", "deep"))
    ap.add_argument("--rounds", type=int, default=5, help="fresh processes (medians are printed)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--child", args.grid], capture_output=True,
                                      text=True, check=True).stdout.strip().splitlines()[-1])
            for _ in range(args.rounds)]
    rows = runs[0]["rows"]
    firsts = [r["first"]["total"] for r in runs]
    memos = [r["memoised"]["total"] for r in runs]
    print(f"llama3-405b-16k {args.grid} grid, {rows:,} valid rows, {args.rounds} fresh processes")
    first, memo = statistics.median(firsts), statistics.median(memos)
    print(f"  first call: median {first * 1e3:.0f} ms ({rows / first:,.0f} configs/s), "
          f"min {min(firsts) * 1e3:.0f} ms;  memoised: median {memo * 1e3:.0f} ms, "
          f"min {min(memos) * 1e3:.0f} ms")
    print(f"  {'piece':18s} {'calls':>7s} {'first ms':>9s} {'memoised ms':>12s}")
    for _, name, _ in PIECES:
        first = [r["first"]["pieces"].get(name, [0, 0.0]) for r in runs]
        memo = [r["memoised"]["pieces"].get(name, [0, 0.0]) for r in runs]
        print(f"  {name:18s} {first[0][0]:7d} {statistics.median(f[1] for f in first) * 1e3:9.1f} "
              f"{statistics.median(m[1] for m in memo) * 1e3:12.1f}")


if __name__ == "__main__":
    main()
