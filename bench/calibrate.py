"""Predicted vs published: Megatron-LM SC21 Table 1 and the nccl-tests calibration rows.

Run: python bench/calibrate.py
Prints one line per row and the mean/max absolute relative error, the figures quoted when the
default constants (hardware.GEMM_FRACTION_OF_MEASURED, topology.SCALE_UP_EFFICIENCY,
collectives.NVLS_EFFICIENCY) were fitted.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.calibration import megatron_rows, megatron_scenario, read_csv  # noqa: E402
from explorer.nccl_table import collective_rows  # noqa: E402
from explorer.scenario import from_dict  # noqa: E402
from explorer.simulate import simulate  # noqa: E402


def main() -> None:
    errs = []
    print(f"{'model':>8} {'tp':>3} {'pp':>3} {'dp':>3} {'gpus':>5} "
          f"{'measured':>9} {'predicted':>9} {'error':>7}  bubble  mfu")
    for row in megatron_rows():
        r = simulate(megatron_scenario(row))
        err = r.tflops_per_gpu / row.achieved_tflops_per_gpu - 1
        errs.append(abs(err))
        print(f"{row.params_billion:>7g}B {row.tp:>3} {row.pp:>3} {row.dp:>3} {row.gpus:>5} "
              f"{row.achieved_tflops_per_gpu:>9.0f} {r.tflops_per_gpu:>9.1f} {err:>+7.1%}  "
              f"{r.bubble_fraction:.3f}  {r.mfu:.3f}")
    print(f"Megatron SC21 Table 1: mean |error| {sum(errs) / len(errs):.1%}, max {max(errs):.1%}")
    nerr = []
    for row in read_csv("nccl_busbw.csv"):
        size = 8 * 2**30 if row["size_bytes"] == "large" else int(row["size_bytes"])
        sc = from_dict({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 8},
                        "hardware": {"gpu": row["gpu"]},
                        "cluster": {"gpus_per_node": int(row["gpus"]), "nodes": 1}})
        out = collective_rows(sc, row["collective"].replace("_", "-"), int(row["gpus"]), [size],
                              row["algorithm"])[0]
        err = out["busbw_GBps"] / float(row["busbw_GBps"]) - 1
        nerr.append(abs(err))
        print(f"nccl {row['gpu']:>10} {row['collective']} {row['algorithm']:>5}: "
              f"measured {float(row['busbw_GBps']):7.1f} "
              f"predicted {out['busbw_GBps']:7.1f} GB/s ({err:+.1%})")
    print(f"nccl-tests rows: mean |error| {sum(nerr) / len(nerr):.1%}, max {max(nerr):.1%}")


if __name__ == "__main__":
    main()
