"""``report SCENARIO [--set K=V ...] --html FILE [--base-url URL]``: the run as one self-contained
HTML file (explorer/report) — cards, every chart, the scenario YAML and its share link — that
opens offline.

An unknown scenario, a bad ``--set``, an unwritable FILE or a bad ``--base-url`` is one line and
exit 2 (ScenarioError, by explorer.cli); FILE is checked before the simulation runs.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..config.schema import excerpt
from ..scenario import ScenarioError

NAME = "report"
HELP = "write the run as one self-contained HTML file (cards, charts, YAML, share link) that opens offline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..report.link import DEFAULT_BASE_URL

    parser.add_argument("scenario", metavar="SCENARIO", help="scenario file or shipped name")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field (dotted key), as run takes it")
    parser.add_argument("--html", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, metavar="URL", dest="base_url",
                        help=f"where the app is served, for the share link (default {DEFAULT_BASE_URL})")


def writable(path: str) -> Path:
    """``path`` if a file can be written there; else ScenarioError naming --html and why."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ScenarioError("--html", f"{excerpt(path)} is a directory; give a file name such as report.html")
    if not parent.is_dir():
        raise ScenarioError("--html", f"{excerpt(str(parent))}: no such directory")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ScenarioError("--html", f"{excerpt(path)} is not writable")
    return p


def run(args: argparse.Namespace) -> int:
    from ..cli import load_scenario
    from ..report import inputs_of_result, report_html, report_link
    from ..report.link import check_base_url
    from ..simulate import simulate

    out = writable(args.html)
    check_base_url(args.base_url)
    sc = load_scenario(args.scenario, args.set)
    link = report_link(args.scenario, sc, args.base_url)
    html = report_html(inputs_of_result(simulate(sc), link))
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise ScenarioError("--html", f"{excerpt(args.html)}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({len(html) / 1e6:.1f} MB): open it in a browser, no server needed")
    return 0
