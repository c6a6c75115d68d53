"""Long commands are visible and interruptible (issue 32): ``search``, ``sweep``, ``advise`` and
``scaling`` show a progress line on stderr soon after they start, even when stderr is a pipe;
Ctrl-C (SIGINT to the whole process group, as a terminal sends it, or to the command alone) ends
the command and every worker process it started, with exactly one line saying how far it got,
exit code 130 and no traceback; and the counts that decide how long a run takes (``--top``,
``--workers``) are bounded by argparse with a one-line error.

The CLI runs as a user runs it: a subprocess in its own process group, stderr a pipe.  The bounds
asserted on time are generous (a loaded 2-core CI machine); the figures measured on the reference
machine (first line within about a second, exit a fraction of a second after SIGINT) are in
docs/command-line.md.
"""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from explorer.design.progress import Interrupted, Reporter, next_phase, reporting

ROOT = Path(__file__).resolve().parents[1]
FIRST_LINE_S = 15          # the progress line must appear within this (measured: about 1 s)
STOPPED_S = 15             # the command and its workers must be gone within this after SIGINT
WORKERS_S = 30             # a pooled command must have started its workers within this

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

# 4 x 2,000 x 4 = 32,000 combinations (5-30 s); a value list stays within the input boundary's
# 4,096 items (explorer/config/inputs.py).
NICS = ",".join(str(g) for g in range(100, 2100))
LATENCIES = "1,2,3,4"
SIZES = ",".join(str(4096 * k) for k in range(1, 65))
# (command line, whether it runs its work on a pool of worker processes)
LONG = {
    "search": (["search", "straggler-16k"], True),
    "sweep": (["sweep", "llama3-405b-16k", "--vary", "parallelism.tp=1,2,4,8", "--vary",
               f"cluster.scale_out.nic_Gbps={NICS}", "--vary", f"cluster.scale_up.latency_us={LATENCIES}"],
              True),
    "advise": (["advise", "mixed-generations"], True),
    "scaling": (["scaling", "straggler-16k", "--gpus", SIZES], False),
}


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":      # state, ppid, pgrp, ...
            out.append(int(stat.parent.name))
    return out


@contextmanager
def _sigint_deliverable() -> Iterator[None]:
    """SIGINT neither blocked in this thread nor ignored while a command is started: a process
    inherits both (a blocked mask and SIG_IGN survive exec, and Python then keeps SIGINT ignored),
    as a shell's Ctrl-C target never has them.  Earlier tests in the same pytest worker may leave
    either behind (the design commands' Ctrl-C paths run in-process: pool.sigint_blocked /
    sigint_ignored, cli._after_interrupt); the full suite then started commands that could not be
    interrupted."""
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if main_thread else None
    if main_thread and handler == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if main_thread and handler == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _Cli:
    """``python -m explorer ARGS`` in its own process group, stderr read line by line."""

    def __init__(self, args: list[str]) -> None:
        with _sigint_deliverable():
            self.proc = subprocess.Popen([sys.executable, "-m", "explorer", *args], cwd=ROOT,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                         encoding="utf-8", start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, condition, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if condition():
                return True
            if self.proc.poll() is not None:
                return condition()
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)


@pytest.mark.parametrize("name, target", [("search", "group"), ("search", "parent"), ("sweep", "group"),
                                          ("advise", "group"), ("scaling", "group")])
@pytest.mark.slow
def test_ctrl_c_stops_the_command_and_its_workers_with_one_line(name, target):
    args, pooled = LONG[name]
    cli = _Cli(args)
    pgid = cli.proc.pid
    try:
        assert cli.wait_for(lambda: any(ln.startswith(f"{name}: ") for ln in cli.lines), FIRST_LINE_S), \
            f"no progress line on stderr within {FIRST_LINE_S} s: {cli.lines}"
        if pooled:      # the point is to stop the workers too: wait until they run
            assert cli.wait_for(lambda: len(_group(pgid)) > 1, WORKERS_S), "no worker processes started"
        assert cli.proc.poll() is None, "the command ended before it could be interrupted"
        if target == "group":
            os.killpg(pgid, signal.SIGINT)            # what Ctrl-C in a terminal does
        else:
            os.kill(pgid, signal.SIGINT)              # the command alone: it must stop its workers itself
        sent = time.monotonic()
        assert cli.wait_for(lambda: cli.proc.poll() is not None, STOPPED_S), \
            f"still running {STOPPED_S} s after SIGINT"
        end = time.monotonic() + 5
        while _group(pgid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _group(pgid), f"processes left behind: {_group(pgid)}"
        took = time.monotonic() - sent
    finally:
        cli.close()
    assert cli.proc.returncode == 130
    lines = cli.lines
    assert not any("Traceback" in ln or "Error" in ln for ln in lines), "\n".join(lines)
    assert sum("interrupted" in ln for ln in lines) == 1, "\n".join(lines)
    assert lines[-1].startswith(f"interrupted: {name} stopped "), "\n".join(lines)
    assert all(ln.startswith(f"{name}: ") for ln in lines[:-1]), "\n".join(lines)
    assert took < STOPPED_S


@pytest.mark.slow
def test_workers_do_not_outlive_a_command_killed_outright():
    """SIGKILL (or the out-of-memory killer) gives the command no chance to stop its pool: the
    workers see their pipe close and exit by themselves."""
    cli = _Cli(LONG["search"][0])
    pgid = cli.proc.pid
    try:
        assert cli.wait_for(lambda: len(_group(pgid)) > 1, WORKERS_S), "no worker processes started"
        os.kill(pgid, signal.SIGKILL)
        # A worker notices once its chunk is done (a quarter of a second of work).
        end = time.monotonic() + STOPPED_S
        while _group(pgid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _group(pgid), f"workers left behind: {_group(pgid)}"
    finally:
        for pid in _group(pgid):
            os.kill(pid, signal.SIGKILL)
        cli.close()


def _run(*args: str) -> subprocess.CompletedProcess:
    # A bound not checked up front would start hours of work: the timeout fails the test instead.
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, capture_output=True, text=True,
                          encoding="utf-8", timeout=60)


@pytest.mark.parametrize("args, line", [
    (["search", "straggler-16k", "--top", "1000000"],
     "error: --top: 1,000,000 is out of range (give 1 to 100)"),
    (["search", "teaching-8gpu", "--top", "ten"],
     "error: --top: 'ten' is not a whole number (give 1 to 100)"),
    (["advise", "mixed-generations", "--top", "100000"],
     "error: --top: 100,000 is out of range (give 1 to 50)"),
    (["sweep", "teaching-8gpu", "--vary", "parallelism.tp=1,2", "--workers", "100000"],
     "error: --workers: 100,000 is out of range (give 1 to 256)"),
    (["search", "teaching-8gpu", "--gpus", "20000000"],
     "error: --gpus: 20,000,000 is out of range (give 1 to 10,000,000)"),
])
def test_counts_beyond_their_bound_are_one_line_exit_2(args, line):
    proc = _run(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == line


@pytest.mark.slow
def test_help_states_the_bounds():
    text = " ".join(_run("search", "--help").stdout.split())
    assert "1 to 100 (default 10)" in text and "1 to 256" in text and "at most 10,000,000" in text
    assert "1 to 50 (default 5)" in " ".join(_run("advise", "--help").stdout.split())
    sweep = " ".join(_run("sweep", "--help").stdout.split())
    assert "at most 1,000,000 combinations, 10,000 with --full" in sweep


def test_sweep_on_the_full_engine_is_bounded():
    from explorer.design.sweep import MAX_FULL_COMBINATIONS, combinations
    from explorer.scenario import ScenarioError

    vary = {"a": list(range(101)), "b": list(range(100))}      # 10,100 combinations
    assert len(combinations(vary)) == 10_100                     # the estimator takes them
    with pytest.raises(ScenarioError, match=f"at most {MAX_FULL_COMBINATIONS:,} with --full"):
        combinations(vary, "full")


def test_reporter_lines_count_each_phase_and_say_where_it_stopped():
    out = io.StringIO()
    rep = Reporter("search", out, tty=False, delay_s=0.0)
    assert next_phase(rep, "estimating", "layouts", 65_076) is rep
    rep(12_345, 65_076)
    assert rep.text().startswith("search: estimating: 12,345 of 65,076 layouts (19%), ")
    assert rep.stopped() == "search stopped after 12,345 of 65,076 layouts (estimating)"
    rep.phase("enumerating layouts", "layouts")
    assert rep.stopped() == "search stopped while enumerating layouts"
    # A plain callback (the app's) counts only the phase it was given for.
    assert next_phase(lambda d, t: None, "simulating in full", "layouts") is None


def test_reporter_draws_from_its_own_thread_and_reporting_turns_ctrl_c_into_one_line():
    out = io.StringIO()
    with pytest.raises(Interrupted) as got:
        with reporting("sweep", out, tty=False) as rep:
            rep.phase("estimating", "combinations", 10)
            rep(3, 10)
            deadline = time.monotonic() + 10        # the main thread is busy: the reporter's thread draws
            while "3 of 10" not in out.getvalue() and time.monotonic() < deadline:
                time.sleep(0.05)
            raise KeyboardInterrupt
    assert "sweep: estimating: 3 of 10 combinations (30%)" in out.getvalue()
    assert str(got.value) == "sweep stopped after 3 of 10 combinations (estimating)"
    assert not [t for t in threading.enumerate() if t.name == "explorer-progress"]
