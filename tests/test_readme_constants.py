"""Every constant the README or a page of docs/ quotes by name carries, on the same line, the value
the code has (issue 32: the README quoted GEMM_FRACTION_OF_MEASURED as 0.90 while the code had 0.92)."""
from __future__ import annotations

import importlib
import re

import pytest

from conftest import ROOT

CONST = re.compile(r"`(?:(?P<mod>[a-z_]+(?:\.[a-z_]+)*)\.)?(?P<name>[A-Z][A-Z0-9_]{3,})`")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def _locate(name: str, module: str | None):
    """The value of ``name``: from ``explorer.<module>`` when the page names it (``physics.hardware``),
    else from the one module of explorer/ that assigns it at top level."""
    if module is not None:
        # A page names a module by its path's tail (`physics.hardware.X`, `hardware.X`).
        homes = [p for p in (ROOT / "explorer").rglob(module.replace(".", "/") + ".py")
                 if re.search(rf"^{name}\s*(?::[^=]+)?=", p.read_text(encoding="utf-8"), re.M)]
        assert len(homes) == 1, f"{module}.{name}: defined in {len(homes)} modules ({homes})"
        dotted = ".".join(homes[0].relative_to(ROOT).with_suffix("").parts)
        return getattr(importlib.import_module(dotted), name)
    homes = [p for p in (ROOT / "explorer").rglob("*.py")
             if re.search(rf"^{name}\s*(?::[^=]+)?=", p.read_text(encoding="utf-8"), re.M)]
    assert len(homes) == 1, f"{name}: defined in {len(homes)} modules ({homes})"
    dotted = ".".join(homes[0].relative_to(ROOT).with_suffix("").parts)
    return getattr(importlib.import_module(dotted), name)


def _values(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _values(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _values(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _quoted() -> list[tuple[str, str, str | None, str]]:
    """(page:line, name, module or None, the line) for every constant quoted in README.md and docs/*.md."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(f"{page.relative_to(ROOT).as_posix()}:{i}", m["name"], m["mod"], line) for page in pages
            for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            for m in CONST.finditer(line)]


@pytest.mark.parametrize("where,name,module,line", _quoted(), ids=lambda x: str(x)[:30])
def test_readme_quotes_each_named_constant_at_its_value(where, name, module, line):
    values = _values(_locate(name, module))
    if not values:
        pytest.skip(f"{name} is not numeric")
    quoted = NUMBER.findall(line)
    for v in values:
        assert any(_same(q, v) for q in quoted), (
            f"{where} quotes {name} but not its value {v} (numbers on the line: {quoted})")


def _same(quoted: str, value: float) -> bool:
    """``quoted`` is ``value`` written to its own precision (a whole number only for a whole value:
    "1" on the line must not pass for 0.92)."""
    decimals = len(quoted.partition(".")[2])
    if decimals == 0 and value != round(value):
        return False
    return abs(float(quoted) - value) <= 0.5 * 10 ** -decimals


def test_the_readme_quotes_constants_at_all():
    """The check above has something to check (a rewrite of the pages that drops every quote would
    make it vacuous), and a quote naming its module is checked against that module."""
    quoted = _quoted()
    assert {"SUSTAINED_OVER_BURST", "P2P_NET_US"} <= {name for _, name, _, _ in quoted}
    assert ("SUSTAINED_OVER_BURST", "physics.power") in {(name, mod) for _, name, mod, _ in quoted}
