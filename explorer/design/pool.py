"""A process pool that Ctrl-C stops at once, leaving nothing behind (explorer/design/executors.py).

``concurrent.futures.ProcessPoolExecutor`` cannot be stopped mid-run: it only waits for its queued
chunks (SIGINT: minutes), and terminating its workers instead may cut a result message in half,
which its manager thread then waits for forever, so the interpreter never exits (measured: about
1 interrupted sweep in 20).  This pool has no thread.  Each worker owns a duplex pipe and holds one
chunk at a time; the calling thread hands out chunks and waits on the pipes itself
(:func:`multiprocessing.connection.wait`, which Ctrl-C interrupts).  Stopping it is: terminate the
workers (SIGTERM, SIGKILL after STOP_GRACE_S), reap them, close the pipes — no half message is ever
read.

- Workers ignore SIGINT: Ctrl-C is the caller's to decide.  They are started with SIGINT blocked
  and ignore it before unblocking it, so none dies of it with a traceback, however early it comes;
  they are daemonic, so even a caller that dies without stopping the pool takes them along.
- A chunk that raises raises in the caller (as a RuntimeError with the message, if the exception
  does not pickle); a worker that dies (killed, out of memory) ends the map with :class:`WorkerDied`.
- ``method`` is the start method: "fork" (fast, shares the caller's memory) or "forkserver" (for a
  threaded caller, whose locks a fork could copy held); ``fn`` must be a top-level function.
"""
from __future__ import annotations

import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from typing import Any, cast

STOP_GRACE_S = 1.0          # a terminated worker gets this long to exit before it is killed


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, out of memory)."""


def run(fn: Callable[[Any], Any], chunks: Sequence[Any], workers: int, method: str,
        done: Callable[[int, Any], None]) -> None:
    """``done(i, fn(chunks[i]))`` for every chunk, in the order they finish, on ``workers``
    processes; on any exception (Ctrl-C included) the workers are stopped before it propagates."""
    # get_context returns one of these for a start method's name; each has Process (typeshed's
    # BaseContext, which a str argument gives statically, does not declare it).
    ctx = cast("SpawnContext | ForkContext | ForkServerContext", multiprocessing.get_context(method))
    procs: dict[Connection, Any] = {}
    try:
        with sigint_blocked():          # inherited by the workers (module docstring)
            for _ in range(workers):
                here, there = ctx.Pipe()
                # A forked worker holds copies of this process's pipe ends: it closes them, so that
                # if this process dies without stopping it, its pipe reads EOF and it exits.
                ours = [here, *procs] if method == "fork" else []
                p = ctx.Process(target=_serve, args=(fn, there, ours), daemon=True, name="explorer-worker")
                p.start()
                there.close()           # the worker's end lives in the worker only: its death is EOF here
                procs[here] = p
        todo = iter(range(len(chunks)))
        busy: dict[Connection, int] = {}
        for conn in procs:
            _give(conn, procs[conn], next(todo, None), chunks, busy)
        while busy:
            for conn in cast(list[Connection], wait(list(busy))):    # wait returns what it was given
                i = busy.pop(conn)
                try:
                    ok, value = conn.recv()
                except (EOFError, OSError):
                    raise _died(procs[conn]) from None
                if not ok:
                    raise value
                done(i, value)
                _give(conn, procs[conn], next(todo, None), chunks, busy)
        for p in procs.values():
            p.join()
    except BaseException:
        stop(list(procs.values()))
        raise
    finally:
        for conn in procs:
            conn.close()


def _give(conn: Connection, proc: Any, i: int | None, chunks: Sequence[Any],
          busy: dict[Connection, int]) -> None:
    """Hand chunk ``i`` to a worker, or tell it to exit (None)."""
    try:
        conn.send(None if i is None else chunks[i])
    except OSError:                     # its end is closed: it died
        raise _died(proc) from None
    if i is not None:
        busy[conn] = i


def _died(proc: Any) -> WorkerDied:
    proc.join(STOP_GRACE_S)
    return WorkerDied(f"a worker process ended without answering (exit code {proc.exitcode}); "
                      "out of memory? try fewer --workers")


def _serve(fn: Callable[[Any], Any], conn: Connection, inherited: list[Connection]) -> None:
    """A worker: ignore SIGINT, close the caller's pipe ends it ``inherited`` by fork, then answer
    chunks with ``(True, result)`` or ``(False, exception)`` until told None or the caller's end
    closes (the caller died)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for c in inherited:
        c.close()
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        try:
            reply: tuple[bool, Any] = (True, fn(chunk))
        except Exception as exc:        # noqa: BLE001 - the caller raises it
            reply = (False, exc)
        try:
            conn.send(reply)            # pickled whole before a byte is written
        except Exception as exc:        # noqa: BLE001 - a result or exception that does not pickle
            conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def stop(procs: list[Any]) -> None:
    """Terminate ``procs`` (SIGTERM, then SIGKILL after STOP_GRACE_S) and reap them, a second Ctrl-C
    ignored meanwhile so it cannot leave one running."""
    with sigint_ignored():
        for p in procs:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block (held back, not lost: it arrives when the
    block ends); a process started inside inherits the mask."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored for the block, in the main thread (elsewhere signals are not ours to set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
