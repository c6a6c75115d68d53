"""The table of scenario fields in docs/scenario-reference.md, generated from the schema (one source
of truth).

``python -m explorer.docs`` (or ``python -m explorer.config.docs``) prints it; tests/test_docs.py
checks that docs/scenario-reference.md holds exactly this table, so a new field, a changed default
or a changed bound cannot go undocumented.
"""
from __future__ import annotations

import dataclasses

from .overrides import SETTABLE

HEADER = "| key | default | valid | meaning |\n|---|---|---|---|"


def _default(f: dataclasses.Field) -> str:
    if f.metadata.get("required"):
        return "required"
    if f.default is dataclasses.MISSING or f.default is None or f.default in ("", ()):
        return "—"
    if isinstance(f.default, bool):
        return "true" if f.default else "false"
    return f"{f.default:g}" if isinstance(f.default, float) else str(f.default)


def _number(x) -> str:
    return f"{x:,g}" if isinstance(x, float) else f"{x:,}"


def _valid(f: dataclasses.Field) -> str:
    m = f.metadata
    if "valid" in m:                      # a structured field says what it takes in words
        return m["valid"]
    if "choices" in m:
        return " \\| ".join(map(str, m["choices"]))
    if "min" in m or "gt" in m or "max" in m:
        lo = _number(m["min"]) if "min" in m else f"> {_number(m['gt'])}"
        return f"{lo} .. {_number(m['max'])}" if "max" in m else f"≥ {lo}"
    if f.type in (bool, "bool") or isinstance(f.default, bool):
        return "true \\| false"
    return "text"


def field_table() -> str:
    """Markdown table: every user-settable field with its default, valid values and meaning."""
    rows = [HEADER]
    for key, f in SETTABLE.items():
        m = f.metadata
        if m.get("derived"):
            continue
        meaning = m.get("doc", "")
        if m.get("why"):
            meaning += f" (bounds: {m['why']})"
        rows.append(f"| `{key}` | {_default(f)} | {_valid(f)} | {meaning} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(field_table())
