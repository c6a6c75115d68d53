"""What the design-space commands share: executor flags, bounded counts, JSON and number output.

Their progress line (stderr, after half a second) and the one line they leave on Ctrl-C are
explorer/design/progress.py's :func:`~explorer.design.progress.reporting`.  Every count a user
gives (``--top``, ``--workers``, ``--gpus``) has an upper bound, stated in ``--help`` and checked
by argparse (:func:`bounded_int`): a typo such as ``--top 1000000`` is a one-line error (exit 2),
not hours of simulation.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..config.schema import excerpt
from ..errors import InternalError
from ..scenario import parse_assignments
from .executors import EXECUTORS, ExecutorSpec

MAX_WORKERS = 256       # worker processes: more than any one machine's cores (each takes 0.4-0.6 GB)


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``lo`` to ``hi``, else argparse's one-line error
    ``argument --flag: ...`` naming the range (exit 2 through explorer/cli.py)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a whole number "
                                             f"(give {lo:,} to {hi:,})") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range (give {lo:,} to {hi:,})")
        return value

    parse.__name__ = "whole number"      # what argparse calls the type in its own messages
    return parse


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor local|dask``, ``--address`` and ``--workers``."""
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="local: this machine's process pool (default); dask: a Dask cluster")
    parser.add_argument("--address", metavar="tcp://HOST:PORT", default=None,
                        help="Dask scheduler to use (default with --executor dask: a LocalCluster here)")
    parser.add_argument("--workers", type=bounded_int(1, MAX_WORKERS), default=None,
                        help=f"worker processes, 1 to {MAX_WORKERS} (default: one per CPU; local pool or "
                             "LocalCluster)")


def executor_spec(args: argparse.Namespace) -> ExecutorSpec:
    return ExecutorSpec(args.executor, args.address, args.workers)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field of the scenario (YAML value)")


def parse_sets(texts: list[str]) -> dict[str, Any]:
    return parse_assignments(texts)


def dumps(obj: Any) -> str:
    """JSON for stdout; a non-finite number is an internal error (exit 1), never ``NaN``."""
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
