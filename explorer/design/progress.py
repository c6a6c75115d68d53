"""Progress of a long command on stderr, and the one line it leaves when interrupted.

The design-space functions report progress through a plain ``progress(done, total)`` callback
(:data:`Progress`; the app passes its own).  A :class:`Reporter` is such a callback that also
knows *phases*: the command, and the functions through :func:`next_phase`, say what runs next
("enumerating layouts", "estimating", "simulating in full"), so the line says what is happening
even in a phase that counts nothing, and Ctrl-C can say how far the work got
(:meth:`Reporter.stopped`: ``search stopped after 12,345 of 65,076 layouts (estimating)``).

A background thread draws the line, so it appears PROGRESS_DELAY_S after the command starts
whatever the main thread is busy with (a run shorter than that shows nothing):

- on a terminal, one line redrawn in place every TTY_REFRESH_S (tqdm's meter: bar, rate, time
  left), erased when the command ends;
- elsewhere (a pipe, a log file, a test), a plain line when the phase changes and every
  PLAIN_INTERVAL_S, so a log shows the run is alive without filling up.

stdout is never written (``--json`` stays one object).  The thread is safe to fork beside
(explorer/design/executors.py forks workers while it runs, marking it ``fork_safe``): it blocks
SIGINT, so Ctrl-C reaches the main thread, which decides; and it writes only while holding
``_DRAW``, which every fork of this process waits for (:func:`os.register_at_fork`), so a worker
never starts with stderr's buffer locked by a thread it does not have.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

Progress = Callable[[int, int], None]

PROGRESS_DELAY_S = 0.5      # the first line: a run shorter than this shows none
TTY_REFRESH_S = 0.25        # a terminal's line is redrawn this often
PLAIN_INTERVAL_S = 10.0     # a plain line at least this often (and at each new phase)
_FORK_WAIT_S = 1.0          # a fork waits at most this long for a line being written

_DRAW = threading.Lock()


def _before_fork() -> None:
    global _HELD
    _HELD = _DRAW.acquire(timeout=_FORK_WAIT_S)


def _after_fork_in_parent() -> None:
    if _HELD:
        _DRAW.release()


def _after_fork_in_child() -> None:
    global _DRAW
    _DRAW = threading.Lock()      # the child has no drawing thread; its copy of the lock may be held


_HELD = False
if hasattr(os, "register_at_fork"):   # POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a command; the message is the one line the CLI prints after ``interrupted:``."""


def next_phase(progress: Progress | None, what: str, unit: str, total: int | None = None) -> Progress | None:
    """Announce a new phase to ``progress`` and return the callback counting it, when ``progress``
    knows phases (a :class:`Reporter`); None for a plain callback (the app's), which counts only
    the main phase it was given for."""
    phase = getattr(progress, "phase", None)
    if phase is None:
        return None
    phase(what, unit, total)
    return progress


class Reporter:
    """The progress of ``command`` on ``stream`` (module docstring); call it as ``progress(done,
    total)`` for the current phase.  ``tty`` None asks the stream."""

    def __init__(self, command: str, stream: TextIO | None = None, tty: bool | None = None,
                 delay_s: float = PROGRESS_DELAY_S) -> None:
        self.command = command
        self._stream = stream if stream is not None else sys.stderr
        self._tty = _isatty(self._stream) if tty is None else tty
        self._delay_s = delay_s
        self._t0 = time.monotonic()
        # (phase number, what, unit, done, total, phase start): replaced whole, so the drawing
        # thread reads a consistent state without a lock the main thread could be interrupted in.
        self._state: tuple[int, str, str, int, int | None, float] = (0, "starting", "", 0, None, self._t0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False           # a terminal line is on screen
        self._printed = (-1, 0.0)     # (phase, time) of the last plain line

    def phase(self, what: str, unit: str = "", total: int | None = None) -> None:
        """Start counting ``total`` ``unit`` (None: nothing counted) for ``what`` runs next."""
        self._state = (self._state[0] + 1, what, unit, 0, total, time.monotonic())

    def __call__(self, done: int, total: int) -> None:
        n, what, unit, _, _, t = self._state
        self._state = (n, what, unit, done, total, t)

    def text(self) -> str:
        """The current phase as a plain line: ``search: estimating: 12,345 of 65,076 layouts (19%), 4 s``."""
        _, what, unit, done, total, _ = self._state
        head = f"{self.command}: {what}"
        elapsed = f"{time.monotonic() - self._t0:.1f} s"
        if not total:
            return f"{head}, {elapsed}"
        return f"{head}: {done:,} of {total:,} {unit} ({done / total:.0%}), {elapsed}"

    def stopped(self) -> str:
        """How far the work got, for the line printed on Ctrl-C."""
        _, what, unit, done, total, _ = self._state
        if not total:
            return f"{self.command} stopped while {what}"
        return f"{self.command} stopped after {done:,} of {total:,} {unit} ({what})"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="explorer-progress", daemon=True)
        # An attribute of our own on the Thread, read by explorer/design/executors.py (module docstring).
        self._thread.fork_safe = True          # type: ignore[attr-defined]
        self._thread.start()

    def close(self) -> None:
        """Stop drawing and erase a terminal's line (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _run(self) -> None:
        _block_sigint()
        while not self._stop.wait(TTY_REFRESH_S):
            if time.monotonic() - self._t0 >= self._delay_s:
                self._draw()

    def _draw(self) -> None:
        if self._tty:
            self._write("\r" + self._meter() + "\x1b[K")
            self._drawn = True
            return
        n, now = self._state[0], time.monotonic()
        if n != self._printed[0] or now - self._printed[1] >= PLAIN_INTERVAL_S:
            self._write(self.text() + "\n")
            self._printed = (n, now)

    def _meter(self) -> str:
        """tqdm's meter for the current phase (bar, rate, time left), as wide as the terminal."""
        from tqdm import tqdm  # its meter only: a tqdm object would start a monitor thread

        _, what, unit, done, total, t = self._state
        width = max(20, _columns(self._stream) - 1)
        if not total:
            return self.text()[:width]
        return tqdm.format_meter(done, total, time.monotonic() - t, ncols=width, unit=f" {unit}",
                                 prefix=f"{self.command}: {what}")[:width]

    def _write(self, text: str) -> None:
        with _DRAW:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):     # stderr closed or gone: progress is not worth an error
                pass


@contextmanager
def reporting(command: str, stream: TextIO | None = None, tty: bool | None = None) -> Iterator[Reporter]:
    """A started :class:`Reporter` for the block; Ctrl-C inside it becomes :class:`Interrupted`
    with the reporter's :meth:`~Reporter.stopped` line, after the progress line is gone."""
    rep = Reporter(command, stream, tty)
    rep.start()
    try:
        yield rep
    except KeyboardInterrupt:
        rep.close()
        raise Interrupted(rep.stopped()) from None
    finally:
        rep.close()


def _columns(stream: Any) -> int:
    """The width of the terminal ``stream`` writes to (stdout may be a pipe while stderr is not)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _block_sigint() -> None:
    """Block SIGINT in the calling thread, so the kernel delivers Ctrl-C to the main thread."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
