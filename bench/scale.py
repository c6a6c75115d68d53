"""Wall time of `python -m explorer run ... --json` as the GPU count grows at fixed pipeline shape.

Run: python bench/scale.py [--repeat 5]
Issue 2 asks: llama3-405b-16k (16,384 GPUs) in at most 2 s including Python start-up, and the same
with dp 1024 (131,072 GPUs) within 1.2x of that.  The smallest run of the same pipeline shape
(TP 8 x PP 16, dp 1: 128 GPUs, the same 16 micro-batches per pipeline) is timed too: the README's
"a 131,072-GPU run simulates as fast as the smallest one of the same pipeline shape".  Runs
alternate between the variants so machine noise hits all alike; the median of each is reported,
and the ratios of medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Every variant keeps 16 micro-batches per pipeline (global batch = 16 x dp) and the pipeline shape.
VARIANTS = {
    "128 GPUs (dp 1)": ["--set", "parallelism.dp=1", "--set", "cluster.nodes=16",
                        "--set", "training.global_batch=16"],
    "16,384 GPUs (dp 128)": [],
    "131,072 GPUs (dp 1024)": ["--set", "parallelism.dp=1024", "--set", "cluster.nodes=16384",
                               "--set", "training.global_batch=16384"],
}


def once(extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "explorer", "run", "scenarios/llama3-405b-16k.yaml", "--json",
                    *extra], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    # As bench/korthikanti.py: an installed package's modules are byte-compiled once; with
    # PYTHONDONTWRITEBYTECODE set (this sandbox) every start would otherwise compile every module.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "explorer")], check=True)
    once([])  # warm the file cache
    for _ in range(args.repeat):
        for name, extra in VARIANTS.items():
            times[name].append(once(extra))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:>24}: median {med[k]:.3f} s  (min {min(v):.3f}, max {max(v):.3f}, n={len(v)})")
    small, a, b = med.values()
    print(f"ratio 131,072 / 16,384 GPUs: {b / a:.3f}; 131,072 / 128 GPUs: {b / small:.3f}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"bare Python start-up for reference: {time.perf_counter() - t0:.3f} s")
    print("load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
