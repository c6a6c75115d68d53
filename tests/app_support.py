"""Helpers to drive the app under ``streamlit.testing`` (AppTest): open a link, read the cards and
the address bar.  Used by tests/test_app.py and tests/test_ui.py."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from conftest import ROOT

APP = str(ROOT / "app.py")


def run_app(**query) -> AppTest:
    """Open the app on a link (its query parameters) and check it raised nothing."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def qp(at: AppTest, key: str) -> str | None:
    """A query parameter as the address bar shows it (one string)."""
    if key not in at.query_params:
        return None
    v = at.query_params[key]
    return v[-1] if isinstance(v, list) else v


def seconds(at: AppTest) -> float:
    """The first card in seconds: Iteration time, or Time per step when replicas train apart; a serving
    scenario's TPOT."""
    text = next(m.value for m in at.metric if m.label in ("Iteration time", "Time per step", "TPOT"))
    value, unit = text.split()
    return float(value.replace(",", "")) * (1e-3 if unit == "ms" else 1.0)
