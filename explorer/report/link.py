"""The share link a report carries: the app's address plus the scenario as link parameters
(explorer/share.py), so whoever runs or hosts the app opens the same scenario from the file."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode, urlsplit

from ..config.schema import excerpt
from ..config.shipped import shipped_scenarios
from ..scenario import Scenario, ScenarioError, from_dict
from ..share import SharedView, preset_raw, to_query
from ..share_reference import closest_preset

# Where `streamlit run app.py` and the Dockerfile serve the app (Streamlit's default port).
DEFAULT_BASE_URL = "http://localhost:8501/"


def check_base_url(base_url: str) -> str:
    """``base_url`` if it is an http(s) address with a host; else ScenarioError naming --base-url."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ScenarioError("--base-url", f"{excerpt(base_url)} is not an http(s) address of the app "
                                          f"without a query, like {DEFAULT_BASE_URL}")
    return base_url


def preset_of(name: str) -> str | None:
    """The shipped scenario a command-line SCENARIO names: its name, or a file of scenarios/ given
    by path; None for any other file."""
    shipped = shipped_scenarios()
    if name in shipped:
        return name
    try:
        path = Path(name).resolve()
    except (OSError, ValueError):
        return None
    return next((k for k, p in shipped.items() if Path(p).resolve() == path), None)


def report_link(name: str, sc: Scenario, base_url: str = DEFAULT_BASE_URL) -> str:
    """The link that opens ``sc`` in the app at ``base_url``: its preset (for another file the
    nearest shipped scenario of its family, share_reference.closest_preset) plus every field that
    differs from it (share.to_query, as the app's address bar writes it)."""
    preset = preset_of(name) or closest_preset(sc)
    query = to_query(SharedView(scenario=preset), from_dict(preset_raw(preset)), sc)
    return f"{check_base_url(base_url).split('?')[0]}?{urlencode(query)}"
