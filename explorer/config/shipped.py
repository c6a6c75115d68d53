"""The scenarios shipped with CommExplorer: where they are and how a name finds its file.

The repository keeps them in the top-level ``scenarios/`` directory (the one source); a built
package carries the same files as ``explorer/scenarios/`` (setup.py maps the directory into the
wheel).  :data:`SCENARIO_DIR` is whichever exists, the installed copy first, so
``commexplorer run teaching-8gpu`` works from any directory, installed or not.
"""
from __future__ import annotations

import re
from pathlib import Path

from .schema import ScenarioError

_PACKAGE = Path(__file__).resolve().parent.parent          # explorer/


def _scenario_dir() -> Path:
    """explorer/scenarios/ in an installed package, else the repository's scenarios/."""
    installed = _PACKAGE / "scenarios"
    return installed if installed.is_dir() else _PACKAGE.parent / "scenarios"


SCENARIO_DIR = _scenario_dir()
# A shipped name is a plain file stem: never a path, so a link or a CLI name cannot leave the folder.
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def shipped_scenarios() -> dict[str, Path]:
    """Name -> path of every shipped scenario file (``*.yaml``), sorted by name.

    >>> "teaching-8gpu" in shipped_scenarios()
    True
    """
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}


def resolve_scenario_path(name: str) -> Path:
    """A file path as given, or the shipped scenario of that name (``.yaml``, ``.yml`` or ``.json``)."""
    p = Path(name)
    try:
        if p.is_file():
            return p
    except (OSError, ValueError):     # a name too long for the file system, or with a NUL byte
        pass
    for cand in (SCENARIO_DIR / f"{name}.yaml", SCENARIO_DIR / f"{name}.yml", SCENARIO_DIR / f"{name}.json"):
        if _NAME.fullmatch(name) and cand.is_file():
            return cand
    # Training scenarios first, the serving ones (issue 37) last: a long list is cut at the end of the line.
    names = sorted(shipped_scenarios(), key=lambda n: (n.startswith("serve-"), n))
    raise ScenarioError(name, f"no such scenario file (shipped scenarios: {', '.join(names)})")
