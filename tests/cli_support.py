"""The command line as tests run it: ``explorer.cli.main`` in this process (:func:`cli`: its exit
code and what it printed, captured, from the repository root) or ``python -m explorer`` in a
subprocess (:func:`cli_process`) where the entry point, real pipes or signals are what is tested.

A subprocess costs about half a second (the interpreter and the imports) before the command runs;
``main`` called here takes the command's own time only, with the pricing this process already
memoised."""
from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from explorer.cli import main

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m explorer ARGS`` as ``main`` runs it, here, from the repository root: the exit code
    it returns and its stdout and stderr (``timeout`` belongs to the subprocess form; unused)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["explorer", *args], code, out.getvalue(), err.getvalue())


def cli_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m explorer ARGS`` in a subprocess from the repository root, UTF-8 text."""
    return subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout)
