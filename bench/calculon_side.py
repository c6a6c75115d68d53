"""Calculon (calculon-ai/calculon, Isaev et al. SC23) timed on the same Korthikanti et al. 2022
Table 5 rows, for bench/korthikanti.py's side-by-side column.

Calculon is not on PyPI (the ``calculon`` name there is an unrelated library), so the bench takes
a checkout of its repository (``--calculon DIR``): its package is imported from DIR, and each row
uses the checkout's own Table 5 inputs (models/<model>.json, validation/seqsel/tab5/<model>_<mode>.json,
systems/a100_80g.json), as its ``llm-validation`` command does.  One evaluation = what that command
does per row: ``Llm(app).compile(system, execution)``, ``run(system)`` and the stats read.
"""
from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from explorer.fidelity.korthikanti import Table5Row

# Table 5's models and recompute modes as Calculon's files name them.
MODELS = {"22B": "megatron-22B", "175B": "gpt3-175B", "530B": "turing-530B", "1T": "megatron-1T"}
MODES = {"full": "full", "selective": "seqsel"}


def calculon_calls(checkout: Path) -> tuple[Callable[[Table5Row], Callable[[], float]], str]:
    """A maker of one Calculon evaluation per row (returning its seconds per iteration), and the
    checkout's description (its commit when it is a git work tree).  Raises SystemExit with one
    line when DIR is not a Calculon checkout."""
    if not (checkout / "calculon" / "llm").is_dir() or not (checkout / "validation").is_dir():
        raise SystemExit(f"--calculon: {checkout} is not a checkout of calculon-ai/calculon "
                         "(needs calculon/llm/ and validation/)")
    sys.path.insert(0, str(checkout))
    import calculon  # noqa: PLC0415  (imported from the checkout given)
    from calculon.llm import Llm  # noqa: PLC0415
    system = calculon.System(calculon.io.read_json_file(str(checkout / "systems" / "a100_80g.json")))
    log = logging.getLogger("calculon")

    def maker(row: Table5Row) -> Callable[[], float]:
        model, mode = MODELS[row.model], MODES[row.recompute]
        app = Llm.Application(calculon.read_json_file(str(checkout / "models" / f"{model}.json")))
        exe = Llm.Execution.from_json(calculon.read_json_file(
            str(checkout / "validation" / "seqsel" / "tab5" / f"{model}_{mode}.json")))

        def call() -> float:
            llm = Llm(app, log)
            llm.compile(system, exe)
            llm.run(system)
            return float(llm.get_stats_json(False)["total_time"])
        return call

    try:
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "not a git work tree"
    return maker, f"{checkout.name} ({commit})"
