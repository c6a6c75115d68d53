"""Where design-space work runs: this process, a local process pool, or a Dask cluster.

Work arrives as a list of *chunks* (each a picklable argument of one top-level function) whose
boundaries the caller fixes from the work alone, never from the executor, so every executor runs
exactly the same computations and returns bit-identical results, in chunk order.

- ``local`` (the default): the chunks run in this process when the caller says the work is small
  (``in_process``; sweep and search say so below about a second of work, where starting worker
  processes would cost more than it saves) or when there is one chunk or one CPU; otherwise on a
  pool of one worker process per CPU (explorer/design/pool.py).  Workers are forked
  when this process runs one thread (the CLI, a script: fast, and no ``__main__`` guard needed);
  a threaded host (the Streamlit server) starts them from a ``forkserver`` instead, because
  forking a process whose other threads may hold locks can deadlock the child.
- ``dask``: the chunks are Dask futures on the scheduler at ``address`` (``tcp://HOST:8786``,
  workers started with ``dask worker``), or on a :class:`distributed.LocalCluster` of one
  single-threaded worker per CPU when no address is given.  The scheduler and every worker need
  this package installed at the same version (the scheduler unpickles the task graph, which names
  our functions): before any work, one probe task compares a fingerprint of the worker's
  ``explorer`` sources with ours, so a missing or different install is a one-line error instead
  of a hang or silently different numbers.

``progress(done, total)`` is called after every finished chunk with counts of items (the caller's
sizes), from the calling thread.

Ctrl-C belongs to the calling process: the local pool is explorer/design/pool.py, whose workers
ignore SIGINT and which stops them at once (chunks not started dropped, running ones abandoned)
when the caller is interrupted or a chunk fails, so KeyboardInterrupt reaches the caller within a
fraction of a second, leaving no worker behind.  On Dask the futures are cancelled and the
LocalCluster closed; its worker processes ignore SIGINT too (:func:`dask_setup`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from ..scenario import ScenarioError
from .progress import Progress

T = TypeVar("T")
R = TypeVar("R")
EXECUTORS = ("local", "dask")
# A Dask scheduler address: [tcp://]host:port, the port 1-65535 in ASCII digits.  Other protocols
# (tls, ucx) need security objects or packages this CLI does not set up (a regression hunt found
# them failing as internal errors), so they are refused with the form to use.
_ADDRESS = re.compile(r"(tcp://)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([1-9][0-9]{0,4})", re.ASCII)
CONNECT_TIMEOUT_S = 10         # a wrong --address fails in seconds, not minutes
PROBE_TIMEOUT_S = 60           # a worker that cannot import explorer dies; no answer within this is an error
_PACKAGE = Path(__file__).resolve().parents[1]     # explorer/


def _valid_address(address: str) -> bool:
    """Whether ``address`` has the form :data:`_ADDRESS` names, its port within 1-65535."""
    m = _ADDRESS.fullmatch(address)
    return m is not None and int(m.group(3)) <= 65535


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:      # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ExecutorSpec:
    """How to run: ``kind`` local or dask; ``address`` of a Dask scheduler (dask only; None starts
    a LocalCluster); ``workers`` (None: one per CPU); ``processes`` False runs a LocalCluster's
    workers as threads of this process (quick to start; tests use it)."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None
    processes: bool = True

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ScenarioError("--executor", f"{self.kind!r} is not one of {', '.join(EXECUTORS)}")
        if self.address is not None and self.kind != "dask":
            raise ScenarioError("--address", "needs --executor dask (a Dask scheduler's address)")
        # Checked before any work (a hunt found advise's --address foo refused after the estimate
        # and the first simulations); whether the scheduler answers is known only on connecting.
        if self.address is not None and not _valid_address(self.address):
            raise ScenarioError("--address", f"{self.address!r} is not a scheduler address; write "
                                "tcp://HOST:PORT (e.g. tcp://10.0.0.1:8786)")
        if self.workers is not None and self.workers < 1:
            raise ScenarioError("--workers", f"{self.workers} must be at least 1")


def map_chunks(fn: Callable[[T], R], chunks: Sequence[T], spec: ExecutorSpec | None = None, *,
               sizes: Sequence[int] | None = None, in_process: bool = False,
               progress: Progress | None = None) -> list[R]:
    """``[fn(c) for c in chunks]``, run where ``spec`` says (module docstring), in chunk order."""
    spec = spec or ExecutorSpec()
    sizes = list(sizes) if sizes is not None else [1] * len(chunks)
    if spec.kind == "dask":
        return _dask(fn, chunks, spec, sizes, progress)
    workers = min(spec.workers or cpu_count(), len(chunks))
    if in_process or workers <= 1:
        return _here(fn, chunks, sizes, progress)
    return _pool(fn, chunks, workers, sizes, progress)


def _here(fn: Callable[[T], R], chunks: Sequence[T], sizes: list[int], progress: Progress | None) -> list[R]:
    out, done, total = [], 0, sum(sizes)
    for chunk, size in zip(chunks, sizes, strict=True):
        out.append(fn(chunk))
        done += size
        if progress:
            progress(done, total)
    return out


def _pool(fn: Callable[[T], R], chunks: Sequence[T], workers: int, sizes: list[int],
          progress: Progress | None) -> list[R]:
    from . import pool  # deferred, as Dask below: every CLI command imports this module

    out: list[Any] = [None] * len(chunks)
    done, total = 0, sum(sizes)

    def finished(i: int, result: Any) -> None:
        nonlocal done
        out[i] = result
        done += sizes[i]
        if progress:
            progress(done, total)

    pool.run(fn, chunks, workers, "fork" if _fork_safe() else "forkserver", finished)
    return out


def _fork_safe() -> bool:
    """Whether forking is safe: no thread but this one runs, except threads that promise to hold no
    lock across a fork (``fork_safe``: the CLI's progress line, explorer/design/progress.py).  A
    threaded host (the Streamlit server) gets a forkserver instead (module docstring)."""
    me = threading.current_thread()
    return all(t is me or getattr(t, "fork_safe", False) for t in threading.enumerate())


def _dask(fn: Callable[[T], R], chunks: Sequence[T], spec: ExecutorSpec, sizes: list[int],
          progress: Progress | None) -> list[R]:
    from distributed import Client, LocalCluster  # deferred: Dask costs a quarter second to import
    from distributed import as_completed as dask_completed

    from .pool import sigint_blocked, sigint_ignored

    cluster = None
    try:
        # A Ctrl-C while the cluster starts waits until it has (a second or two), rather than
        # interrupting it half-built.
        with sigint_blocked():
            if spec.address is None:
                # A worker process runs dask_setup below first (Dask's preload hook).
                preload = {"preload": [__name__]} if spec.processes else {}
                cluster = LocalCluster(n_workers=spec.workers or cpu_count(), threads_per_worker=1,
                                       processes=spec.processes, dashboard_address=None,
                                       silence_logs=logging.ERROR, **preload)
                client = Client(cluster)
            else:
                try:
                    client = Client(spec.address, timeout=CONNECT_TIMEOUT_S)
                except (OSError, TimeoutError, ValueError) as exc:
                    raise ScenarioError("--address", f"cannot reach the Dask scheduler at {spec.address!r} "
                                        f"({type(exc).__name__}: {exc}); start one with `dask scheduler` "
                                        "and workers with `dask worker tcp://HOST:8786`") from None
        with client:
            _check_workers(client, spec.address)
            futures = client.map(fn, list(chunks), pure=False)
            try:
                return _collect(futures, dask_completed, sizes, progress)
            except BaseException:         # Ctrl-C, or a chunk failed: the rest is not wanted
                with sigint_ignored():
                    client.cancel(futures)
                raise
    finally:
        if cluster is not None:
            with sigint_ignored():
                cluster.close()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run first in each LocalCluster worker process: ignore SIGINT, as a
    pool worker does (Ctrl-C is the caller's, which closes the cluster; the worker's own asyncio
    runner would otherwise die of it with a traceback)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _collect(futures: list[Any], completed: Callable[[list[Any]], Any], sizes: list[int],
             progress: Progress | None) -> list[Any]:
    """The Dask futures' results in submission order, ``progress`` told as each finishes."""
    index = {f.key: i for i, f in enumerate(futures)}
    out: list[Any] = [None] * len(futures)
    done, total = 0, sum(sizes)
    for fut in completed(futures):
        i = index[fut.key]
        out[i] = fut.result()
        done += sizes[i]
        if progress:
            progress(done, total)
    return out


@cache
def source_fingerprint() -> str:
    """SHA-256 of every ``explorer/**/*.py`` file (path and bytes): equal on two machines when they
    run the same code, so their numbers are the same."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(_PACKAGE)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _check_workers(client: Any, address: str | None) -> None:
    """One probe task: a worker answers with its source fingerprint, which must equal ours."""
    where = f"the Dask cluster at {address!r}" if address else "the Dask LocalCluster"
    hint = ("install this package at the same version on the scheduler and every worker (pip install .), "
            "or run the workers from the same checkout")
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except (TimeoutError, OSError):
        raise ScenarioError("--address", f"{where} has no workers; start some with "
                            f"`dask worker {address or 'tcp://HOST:8786'}`") from None
    try:
        theirs = client.submit(source_fingerprint, pure=False).result(timeout=PROBE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - whatever Dask raises (timeout, deserialisation), one line
        raise ScenarioError("--executor", f"{where} could not run a CommExplorer task "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                            f"{hint}") from None
    if theirs != source_fingerprint():
        raise ScenarioError("--executor", f"the workers of {where} run different explorer sources than this "
                            f"process, so their numbers could differ; {hint}")
