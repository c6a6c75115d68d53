"""Helpers to drive the app in a real browser: start Streamlit on a free port, open Debian's
Chromium through Playwright, and wait until a script run has finished and its charts are drawn.

Used by tests/test_app_browser.py and bench/app_latency.py.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_path() -> str | None:
    for cand in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and os.path.exists(cand):
            return cand
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(timeout: float = 60.0) -> Iterator[str]:
    """Run ``streamlit run app.py`` on a free loopback port; yield its base URL."""
    port = free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                             "--server.headless", "true", "--server.port", str(port),
                             "--server.address", "127.0.0.1"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("streamlit did not become healthy") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_ready(page, timeout_s: float = 60.0) -> None:
    """Wait until the script run is over (no running indicator, no stale elements) and every
    Plotly chart on the page has drawn its SVG."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    page.wait_for_function(
        """() => {
            if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
            if (document.querySelector('[data-stale="true"]')) return false;
            if (document.querySelectorAll('[data-testid="stSkeleton"]').length) return false;
            const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
            for (const c of charts) { if (!c.querySelector('.main-svg')) return false; }
            return document.querySelectorAll('[data-testid="stMetric"], [data-testid="stException"], '
                                              + '[data-testid="stAlert"]').length > 0;
        }""", timeout=timeout_s * 1000, polling=100)
    page.wait_for_timeout(300)   # let a rerun triggered by the first render start, if any
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')""", timeout=timeout_s * 1000, polling=100)


def metric_value(page, label: str) -> str:
    """The displayed value of the st.metric card whose label is ``label``."""
    card = page.locator('[data-testid="stMetric"]', has=page.get_by_text(label, exact=True)).first
    return card.locator('[data-testid="stMetricValue"]').inner_text().strip()
