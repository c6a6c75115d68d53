"""What the design-space commands share: executor flags, the progress bar, JSON and number output.

The progress bar is tqdm on stderr; it appears only after PROGRESS_DELAY_S seconds (a short run
shows none) and only on a terminal (tqdm's ``disable=None``), so ``--json`` stdout and piped
output stay clean.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..scenario import parse_assignments
from .executors import EXECUTORS, ExecutorSpec, Progress

PROGRESS_DELAY_S = 1.0


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor local|dask``, ``--address`` and ``--workers``."""
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="local: this machine's process pool (default); dask: a Dask cluster")
    parser.add_argument("--address", metavar="tcp://HOST:PORT", default=None,
                        help="Dask scheduler to use (default with --executor dask: a LocalCluster here)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (default: one per CPU; local pool or LocalCluster)")


def executor_spec(args: argparse.Namespace) -> ExecutorSpec:
    return ExecutorSpec(args.executor, args.address, args.workers)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field of the scenario (YAML value)")


def parse_sets(texts: list[str]) -> dict[str, Any]:
    return parse_assignments(texts)


@contextmanager
def progress_bar(desc: str, unit: str = "config") -> Iterator[Progress]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr (closed on exit)."""
    from tqdm import tqdm

    bar: list[Any] = []

    def update(done: int, total: int) -> None:
        if not bar:
            bar.append(tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None,
                            delay=PROGRESS_DELAY_S, leave=False, dynamic_ncols=True))
        bar[0].update(done - bar[0].n)

    try:
        yield update
    finally:
        if bar:
            bar[0].close()


def dumps(obj: Any) -> str:
    """JSON for stdout; a non-finite number is an internal error (exit 1), never ``NaN``."""
    from ..cli import InternalError

    try:
        return json.dumps(obj, allow_nan=False)
    except ValueError:
        raise InternalError("a design-space figure came out non-finite") from None


def fmt_s(t: float) -> str:
    """Seconds for a table: ms below one second, else seconds with three decimals."""
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.3f} s"


def fmt_breakdown(breakdown_s: dict[str, float]) -> str:
    """The non-zero categories of a breakdown on one line, largest first."""
    parts = sorted(((v, k) for k, v in breakdown_s.items() if v > 0), reverse=True)
    return " · ".join(f"{k} {fmt_s(v)}" for v, k in parts)
