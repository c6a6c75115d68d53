"""Cost of a low-communication window (issue 13): a 16K-GPU DiLoCo run with H = 100 inner steps.

Run: python bench/lowcomm.py [--rounds 5]

The scenario is scenarios/llama3-405b-16k.yaml (Llama 3 405B on 16,384 H100s) split over four
datacenters with DP outermost (each datacenter holds 32 whole pipeline replicas) and
``training.sync.kind: diloco`` every 100 steps.  Prints, in one run: in-process seconds of
``simulate`` (median of --rounds, after a warm-up call) for the synchronous baseline and for the
DiLoCo window, each window's figures, and the whole process ``python -m explorer run ... --json``.
Issue 13 asks that such a window simulates in about a second.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.scenario import load  # noqa: E402
from explorer.simulate import simulate  # noqa: E402

SETS = {"cluster.datacenters": 4, "parallelism.order": "tp-cp-ep-pp-dp"}
WINDOWS = {"every-step": {},
           "diloco H=100": {"training.sync.kind": "diloco", "training.sync.inner_steps": 100},
           "streaming-diloco H=100 F=4 int4": {"training.sync.kind": "streaming-diloco",
                                               "training.sync.inner_steps": 100, "training.sync.fragments": 4,
                                               "training.sync.outer_dtype": "int4"}}


def timed(over: dict, rounds: int) -> tuple[float, object]:
    sc = load(ROOT / "scenarios" / "llama3-405b-16k.yaml", {**SETS, **over})
    res = simulate(sc)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        simulate(sc)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("Llama 3 405B on 16,384 H100s in 4 datacenters (DP across), in-process simulate(), median")
    for name, over in WINDOWS.items():
        t, res = timed(over, args.rounds)
        w = res.sync_window
        extra = (f"inner {w.inner_step_s:.3f} s, sync {w.sync_s:.2f} s, exposed {w.exposed_sync_s:.2f} s per "
                 f"window" if w else "")
        print(f"  {name:<32} {t * 1e3:8.1f} ms   time per step {res.time_per_step_s:.3f} s  {extra}")
    sets = [a for k, v in {**SETS, **WINDOWS["diloco H=100"]}.items() for a in ("--set", f"{k}={v}")]
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "explorer", "run", "llama3-405b-16k", *sets, "--json"],
                       check=True, capture_output=True, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
    print(f"whole process, DiLoCo H=100 (median of 3): {statistics.median(walls):.2f} s")


if __name__ == "__main__":
    main()
