"""Read an HTML report (explorer/report) back: its cards, charts, YAML, share link and embedded
run JSON, with the standard library's HTML parser (no regular expressions over HTML)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Parsed:
    cards: dict[str, object] = field(default_factory=dict)     # data-key -> exact value
    card_labels: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)             # data-chart of each section
    plotly_divs: list[str] = field(default_factory=list)        # id of each plotly-graph-div
    yaml: str = ""
    link: str = ""
    run_json: dict | None = None
    scripts_with_src: list[str] = field(default_factory=list)
    links_with_href: list[str] = field(default_factory=list)    # <link href> (stylesheets, fonts)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Parsed()
        self._in: str | None = None
        self._buf: list[str] = []
        self._label = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "div" and "card" in cls:
            self.out.cards[a["data-key"]] = json.loads(a["data-value"])
        if tag == "div" and "label" in cls:
            self._label = True
        if tag == "div" and "plotly-graph-div" in cls:
            self.out.plotly_divs.append(a["id"])
        if tag == "section" and "data-chart" in a:
            self.out.charts.append(a["data-chart"])
        if tag == "a" and a.get("id") == "share-link":
            self.out.link = a["href"]
        if tag == "script" and a.get("src"):
            self.out.scripts_with_src.append(a["src"])
        if tag == "link" and a.get("href"):
            self.out.links_with_href.append(a["href"])
        if (tag, a.get("id")) in (("pre", "scenario-yaml"), ("script", "run-json")):
            self._in, self._buf = a["id"], []

    def handle_data(self, data):
        if self._in:
            self._buf.append(data)
        if self._label:
            self.out.card_labels.append(data)
            self._label = False

    def handle_endtag(self, tag):
        if self._in and tag in ("pre", "script"):
            text = "".join(self._buf)
            if self._in == "scenario-yaml":
                self.out.yaml = text
            else:
                self.out.run_json = json.loads(text)
            self._in = None


def parse_report(html: str) -> Parsed:
    r = _Reader()
    r.feed(html)
    return r.out
