"""List-valued fields typed as one line of text (``15,10,5``; ``auto`` where the field takes it).

Pure functions (no Streamlit): the sidebar's text inputs for model.gnn.fanouts, model.dlrm.rows,
parallelism.stage_replicas ... show a field's list with :func:`to_text` and read it back with
:func:`parse_list`, whose error names the field and says what is valid.  Bounds and rules between
fields (one fan-out per layer, replicas summing to the GPUs) are the loader's: it names the field
too (explorer/config).
"""
from __future__ import annotations

from typing import Any

from ..config.schema import ScenarioError, excerpt

# Fields that also take the word ``auto`` (PipeDream's partitioner chooses the replica counts:
# explorer/config/replica_field.py).
AUTO_FIELDS = frozenset({"parallelism.stage_replicas"})
# Fields whose empty text means "not set" (the field's default, None): the others need a value.
OPTIONAL_LISTS = frozenset({"parallelism.stage_replicas", "parallelism.stage_layers"})
MAX_TEXT = 20_000          # 26 MLPerf table sizes are ~200 characters


def to_text(value: Any, key: str = "") -> str:
    """What the text input shows for ``value``: its items joined by commas, ``auto`` as itself
    (and, for an AUTO_FIELDS ``key``, the zeros the loader holds it as), empty for None."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if key in AUTO_FIELDS and len(value) and not any(value):
        return "auto"
    return ",".join(str(v) for v in value)


def parse_list(text: str, key: str) -> list[int] | str | None:
    """``text`` (``15, 10, 5``; ``auto`` for AUTO_FIELDS; empty for OPTIONAL_LISTS) as the value of
    ``key``; ScenarioError naming ``key`` and what would be valid otherwise."""
    t = text.strip()
    if len(t) > MAX_TEXT:
        raise ScenarioError(key, f"is {len(t):,} characters; at most {MAX_TEXT:,}")
    if key in AUTO_FIELDS and t.lower() == "auto":
        return "auto"
    if not t:
        if key in OPTIONAL_LISTS:
            return None
        raise ScenarioError(key, "is empty; give whole numbers separated by commas, e.g. 15,10,5")
    items = [s.strip() for s in t.strip("[]").split(",")]
    bad = [s for s in items if not (s.replace("_", "").isascii() and s.replace("_", "").isdigit())]
    if bad:
        also = " or auto" if key in AUTO_FIELDS else ""
        raise ScenarioError(key, f"{excerpt(bad[0])} in {excerpt(t)} is not a whole number; give whole "
                                 f"numbers separated by commas, e.g. 15,10,5{also}")
    return [int(s.replace("_", "")) for s in items]
