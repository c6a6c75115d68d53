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
``?tour=<file>&step=<n>`` (1-based) opens it at that step.  :func:`check_tour` validates every
step's link the way the app reads it, so a tour whose link no longer applies fails its test
rather than opening on something else.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl

import yaml

from .config.schema import ScenarioError
from .config.shipped import SCENARIO_DIR

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


def check_tour(tour: Tour) -> list[str]:
    """Problems of ``tour``: per step, what the app would ignore of its link (empty: all apply)."""
    from .share import parse_query  # share imports the scenario machinery; tours stay light

    problems = []
    for i, step in enumerate(tour.steps, 1):
        view = parse_query(step.params)
        problems += [f"step {i} ({step.title}): {w}" for w in view.warnings]
        if "scenario" not in step.params:
            problems.append(f"step {i} ({step.title}): the link names no scenario")
    return problems
