"""Streaming reader of Chrome-trace JSON (Kineto's ``{"traceEvents": [...], ...}``).

A profiler trace of a real job is tens to hundreds of MB; loading it with ``json.load`` holds the
whole text and every event dict at once.  This reader decodes one top-level value, or one element
of the ``traceEvents`` array, at a time from a buffer refilled in chunks (``json.JSONDecoder.
raw_decode`` on a window), so memory is bounded by the chunk and the largest single event, not by
the file.  ``.gz`` files are read through :mod:`gzip` the same way.  Every malformed input —
not JSON, truncated, not an object, no ``traceEvents`` — raises :class:`TraceError`, one line naming
the file.
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..config.schema import ScenarioError

CHUNK_CHARS = 1 << 18   # 256 Ki characters per read: ~1,000 events (~250 B each) per refill; the peak
#                         memory is a few times this (decode buffers, the window and its refill)
MAX_VALUE_CHARS = 1 << 26   # one event or top-level field; a larger one is not a trace
_WS = " \t\r\n"


class TraceError(ScenarioError):
    """A file that is not a readable trace (the CLI prints it as one line, exit 2)."""

    def __init__(self, path: Path | str, message: str) -> None:
        super().__init__(str(path), message)


def _open(path: Path) -> TextIO:
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"          # gzip's magic number (RFC 1952, 2.3.1)
    if gz:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


class _Reader:
    """A window on the text, refilled on demand; ``pos`` indexes into ``buf``."""

    def __init__(self, fh: TextIO, path: Path) -> None:
        self.fh, self.path = fh, path
        self.buf, self.pos, self.eof = "", 0, False
        self.dec = json.JSONDecoder()

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            more = self.fh.read(CHUNK_CHARS)
        except (OSError, EOFError) as exc:      # a truncated .gz ends in EOFError
            raise TraceError(self.path, f"cannot be read to its end ({exc})") from None
        if not more:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + more
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if c == "" or c not in chars:
            found = "the end of the file" if c == "" else repr(c)
            raise TraceError(self.path, f"is not a Chrome-trace JSON object: expected {what}, found {found} "
                             f"(truncated or not a trace?)")
        self.pos += 1
        return c

    def value(self) -> Any:
        """Decode one JSON value, reading more text while the window holds only part of it."""
        self.peek()
        while True:
            try:
                obj, end = self.dec.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise TraceError(self.path, "nests JSON too deeply to be a trace event") from None
            except json.JSONDecodeError as exc:
                # Only an error at the window's end (or inside a string that runs to it) may be
                # cured by more text; any other is a real syntax error, reported without reading on.
                more_may_help = exc.pos >= len(self.buf) - 1 or exc.msg.startswith("Unterminated string")
                if more_may_help and len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise TraceError(self.path, f"has one JSON value over {MAX_VALUE_CHARS:,} characters: "
                                     "not a trace event") from None
                if more_may_help and self._fill():
                    continue
                if more_may_help:
                    raise TraceError(self.path, "ends in the middle of a JSON value (truncated)") from None
                raise TraceError(self.path, f"is not valid JSON ({exc.msg})") from None
            # A number at the window's end may continue in the next chunk ("12" then "34").
            if end >= len(self.buf) and self._fill():
                continue
            self.pos = end
            return obj


def iter_trace(path: Path) -> Iterator[tuple[str, Any]]:
    """``("event", dict)`` for each element of ``traceEvents``, ``(key, value)`` for the other
    top-level fields (``distributedInfo``, ``deviceProperties``...), in file order.

    A bare JSON array of events (the Chrome trace format's other form) yields its elements."""
    try:
        fh = _open(path)
    except OSError as exc:
        raise TraceError(path, f"cannot be opened ({exc.strerror or exc})") from None
    with fh:
        r = _Reader(fh, path)
        first = r.expect("{[", "'{' or '['")
        if first == "[":
            yield from _array(r)
            return
        seen_events = False
        if r.peek() == "}":
            r.pos += 1
        else:
            while True:
                key = r.value()
                if not isinstance(key, str):
                    raise TraceError(path, "is not valid JSON (an object key is not a string)")
                r.expect(":", "':'")
                if key == "traceEvents":
                    seen_events = True
                    r.expect("[", "'[' after \"traceEvents\"")
                    yield from _array(r)
                else:
                    yield key, r.value()
                if r.expect(",}", "',' or '}'") == "}":
                    break
        if not seen_events:
            raise TraceError(path, "has no \"traceEvents\" list: not a PyTorch profiler / Kineto trace")


def _array(r: _Reader) -> Iterator[tuple[str, Any]]:
    """The elements of an array whose '[' was read; each must be an object (an event)."""
    if r.peek() == "]":
        r.pos += 1
        return
    while True:
        ev = r.value()
        if isinstance(ev, dict):
            yield "event", ev
        if r.expect(",]", "',' or ']' between events") == "]":
            return
