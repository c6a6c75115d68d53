"""Guided tours: a sequence of share links, each with a short narration (issue 14.4).

A tour is a YAML file in ``scenarios/tours/``::

    title: Pipeline bubbles from GPipe to DualPipe
    steps:
      - title: GPipe
        link: scenario=teaching-8gpu&parallelism.schedule=gpipe
        text: |
          Markdown narration of this step.

``link`` is a share link's query string (explorer/share.py: scenario, dotted overrides, ``view``,
``b.`` and ``d.`` parameters); the app plays a tour with next/previous buttons and a link
``?tour=<file>&step=<n>`` (1-based) opens it at that step: :func:`expand_link` turns such a bare
link into the step's own link, so it shows exactly what the step's ``link`` shows.
:func:`explorer.share.check_tour` validates every step's link the way the app reads it, so a
tour whose link no longer applies fails its test rather than opening on something else.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import yaml

from ..config.schema import ScenarioError
from ..config.shipped import SCENARIO_DIR

TOUR_DIR = SCENARIO_DIR / "tours"
MAX_STEPS = 40


@dataclass(frozen=True)
class TourStep:
    title: str
    link: str                      # a share link's query string, without "?"
    text: str                      # Markdown narration

    @property
    def params(self) -> dict[str, str]:
        return dict(parse_qsl(self.link, keep_blank_values=True))


@dataclass(frozen=True)
class Tour:
    name: str                      # the file's stem: what ?tour= names
    title: str
    steps: tuple[TourStep, ...]


def _read(path: Path) -> Tour:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    where = f"tour {path.stem}"
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise ScenarioError(where, "needs a title and a non-empty list of steps")
    if len(data["steps"]) > MAX_STEPS:
        raise ScenarioError(where, f"has {len(data['steps'])} steps; at most {MAX_STEPS}")
    steps = []
    for i, s in enumerate(data["steps"], 1):
        if not isinstance(s, dict) or not all(isinstance(s.get(k), str) for k in ("title", "link", "text")):
            raise ScenarioError(f"{where}, step {i}", "needs title, link and text (strings)")
        steps.append(TourStep(s["title"].strip(), s["link"].strip().lstrip("?"), s["text"].strip()))
    return Tour(path.stem, str(data.get("title", path.stem)).strip(), tuple(steps))


@lru_cache(maxsize=1)
def tours() -> dict[str, Tour]:
    """Every shipped tour by name, in file-name order."""
    if not TOUR_DIR.is_dir():
        return {}
    return {p.stem: _read(p) for p in sorted(TOUR_DIR.glob("*.yaml"))}



def step_number(value: Any, tour: Tour) -> int:
    """The 1-based step a link's ``step=`` names, or 1 when it names none of ``tour``'s steps
    (share.parse_query warns about such a value and shows step 1 too)."""
    text = str(value[-1] if isinstance(value, (list, tuple)) and value else value).strip()
    n = int(text) if text.isascii() and text.isdigit() and len(text) <= 4 else 0
    return n if 1 <= n <= len(tour.steps) else 1


def expand_link(params: Mapping[str, Any]) -> dict[str, Any]:
    """A link's parameters with a bare tour link (``tour`` without ``scenario``) completed by its
    step's own link, so ``?tour=NAME&step=N`` opens that step's scenario and view.

    What the link itself says wins over the step's link (``present``, ``view``, a field); a link
    that names a scenario is returned unchanged, since it already says what to show — the address
    bar during a tour is such a link, with whatever the user changed since.  An unknown tour is
    left for share.parse_query to report (it then opens the default scenario).
    """
    out = dict(params)
    name = out.get("tour")
    name = str(name[-1] if isinstance(name, (list, tuple)) and name else name or "")
    if "scenario" in out or name not in tours():
        return out
    tour = tours()[name]
    step = tour.steps[step_number(out.get("step", "1"), tour) - 1]
    return {**step.params, **out}
